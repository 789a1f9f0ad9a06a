// Connects to a Holon gateway's /mcp the way an MCP client with no key
// does: with the OAuth support of the reference TypeScript SDK
// (@modelcontextprotocol/sdk, its auth() and an OAuthClientProvider), for
// appliance/oauth_node_test.go. It is a native app: it listens on a
// loopback port for the browser to come back with the code.
//
// It speaks to the test on stdout, one JSON object a line:
//   {"event":"authorize","url":…}  open this in the browser (the consent page)
//   {"event":"connected",…}        tools listed, an agent called, tokens refreshed
//   {"event":"done",…}             after the test said "revoked" on stdin
// Any unexpected failure exits 1 with the error on stderr.
//
// Environment: HOLON_MCP_URL; HOLON_CLIENT_METADATA_URL, when set, is the
// https URL of this client's metadata document, used as its client_id
// instead of registering (the SDK does so when the server advertises
// client_id_metadata_document_supported).
import http from 'node:http';
import readline from 'node:readline';
import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError, auth } from '@modelcontextprotocol/sdk/client/auth.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const mcpURL = new URL(process.env.HOLON_MCP_URL);
const say = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
const lines = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();

// The loopback redirect URI (RFC 8252 §7.3): a port of our own.
let onCallback;
const callbacks = [];
const server = http.createServer((req, res) => {
  const u = new URL(req.url, 'http://127.0.0.1');
  if (u.pathname !== '/callback') {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { 'Content-Type': 'text/html' }).end('<!doctype html><title>Connected</title><p id="done">connected, you can close this tab</p>');
  callbacks.push(Object.fromEntries(u.searchParams));
  onCallback?.();
});
await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
const redirectUrl = `http://127.0.0.1:${server.address().port}/callback`;
const nextCallback = () => new Promise((ok) => {
  if (callbacks.length) return ok(callbacks.shift());
  onCallback = () => { onCallback = undefined; ok(callbacks.shift()); };
});

// The provider keeps everything in memory, as the SDK hands it over.
const store = { states: [], authorizeURLs: [], forms: [] };
const provider = {
  get redirectUrl() { return redirectUrl; },
  get clientMetadataUrl() { return process.env.HOLON_CLIENT_METADATA_URL || undefined; },
  get clientMetadata() {
    return {
      client_name: 'Holon Test Client',
      redirect_uris: [redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  },
  state() {
    const s = randomBytes(16).toString('hex');
    store.states.push(s);
    return s;
  },
  clientInformation() { return store.client; },
  saveClientInformation(info) { store.client = info; },
  tokens() { return store.tokens; },
  saveTokens(tokens) { store.tokens = tokens; },
  redirectToAuthorization(url) {
    store.authorizeURLs.push(String(url));
    say({ event: 'authorize', url: String(url) });
  },
  saveCodeVerifier(v) { store.verifier = v; },
  codeVerifier() { return store.verifier; },
  saveDiscoveryState(s) { store.discovery = s; },
  discoveryState() { return store.discovery; },
  invalidateCredentials(scope) {
    if (scope === 'all' || scope === 'tokens') store.tokens = undefined;
    if (scope === 'all' || scope === 'client') store.client = undefined;
    if (scope === 'all' || scope === 'verifier') store.verifier = undefined;
  },
};

const connect = async () => {
  const transport = new StreamableHTTPClientTransport(mcpURL, { authProvider: provider });
  // It can show approval forms: the human allowed them on the consent page.
  const client = new Client({ name: 'holon-oauth-test', version: '0.0.0' }, { capabilities: { elicitation: { form: {} } } });
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    store.forms.push(req.params.message);
    return { action: 'accept', content: { decision: 'approve' } };
  });
  await client.connect(transport);
  return { client, transport };
};

// 1. No token: the 401 starts discovery, registration and the redirect.
const seen = {};
try {
  await connect();
  throw new Error('connected without authorizing');
} catch (e) {
  if (!(e instanceof UnauthorizedError)) throw e;
}
seen.clientId = store.client?.client_id;
seen.discovery = {
  authorizationServer: store.discovery?.authorizationServerUrl,
  resource: store.discovery?.resourceMetadata?.resource,
};

// 2. The browser comes back with the code and our state.
const back = await nextCallback();
seen.stateRoundTripped = back.state === store.states.at(-1);
seen.iss = back.iss;
if (!back.code) throw new Error(`no code: ${JSON.stringify(back)}`);
seen.code = back.code;
{
  const t = new StreamableHTTPClientTransport(mcpURL, { authProvider: provider });
  await t.finishAuth(back.code);
}
seen.firstAccess = store.tokens.access_token;
seen.firstRefresh = store.tokens.refresh_token;
seen.expiresIn = store.tokens.expires_in;

// 3. Connected: list the tools and make a billed call.
const { client, transport } = await connect();
seen.protocolVersion = transport.protocolVersion;
seen.tools = (await client.listTools()).tools.map((t) => t.name).sort();
const echo = await client.callTool({ name: 'call_agent', arguments: { agent: 'test-lab/echo', input: { text: 'over OAuth' } } });
seen.echo = { isError: echo.isError ?? false, structured: echo.structuredContent };
seen.forms = store.forms;

// 4. A refresh, as the SDK does it when it holds a refresh token; the
// session goes on with the new access token.
seen.refresh = await auth(provider, { serverUrl: mcpURL });
seen.secondAccess = store.tokens.access_token;
seen.secondRefresh = store.tokens.refresh_token;
const budget = await client.callTool({ name: 'get_budget', arguments: {} });
seen.budget = budget.structuredContent;
say({ event: 'connected', ...seen });

// 5. The human revokes the key in the console; the next request is refused.
const { value } = await lines.next();
if (value !== 'revoked') throw new Error(`unexpected line ${value}`);
const after = {};
const raw = await fetch(mcpURL, {
  method: 'POST',
  headers: { Authorization: `Bearer ${seen.secondAccess}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' },
  body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '0' } } }),
});
after.status = raw.status;
after.wwwAuthenticate = raw.headers.get('www-authenticate');
after.body = await raw.text();
const before = store.authorizeURLs.length;
try {
  await client.callTool({ name: 'get_budget', arguments: {} });
  after.call = 'succeeded';
} catch (e) {
  after.call = `${e.constructor.name}: ${e.message}`;
}
// The refresh token is refused too, so the SDK starts over: a new consent.
after.askedToAuthorizeAgain = store.authorizeURLs.length > before;
say({ event: 'done', ...after });
server.close();
process.exit(0);
