// Drives a Holon gateway's /mcp with the reference TypeScript MCP client
// (@modelcontextprotocol/sdk), for appliance/mcp_node_test.go. It lists the
// tools, calls an agent, calls one that needs approval and approves it in
// the elicitation form, gets a tool error, then revokes its own key with
// the human key and tries once more. It prints one JSON object with what
// it saw; any unexpected failure exits 1 with the error on stderr.
//
// Environment: HOLON_MCP_URL, HOLON_KEY (agent key, ask_in_client),
// HOLON_HUMAN_KEY and HOLON_KEY_PREFIX (to revoke it), HOLON_API (the
// gateway's origin).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
};

const transport = new StreamableHTTPClientTransport(new URL(env('HOLON_MCP_URL')), {
  requestInit: { headers: { Authorization: `Bearer ${env('HOLON_KEY')}` } },
});
const client = new Client({ name: 'holon-ts-test', version: '0.0.0' }, { capabilities: { elicitation: { form: {} } } });

const forms = [];
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  forms.push({ message: req.params.message, schema: req.params.requestedSchema });
  return { action: 'accept', content: { decision: 'approve' } };
});

const seen = {};
await client.connect(transport);
seen.sessionId = transport.sessionId;
seen.protocolVersion = transport.protocolVersion;

const { tools } = await client.listTools();
seen.tools = tools.map((t) => t.name).sort();

// callTool validates structuredContent against each tool's outputSchema
// (the client throws on a mismatch), so every answer below matched it.
const echo = await client.callTool({ name: 'call_agent', arguments: { agent: 'test-lab/echo', input: { text: 'from TypeScript' } } });
seen.echo = { isError: echo.isError ?? false, structured: echo.structuredContent };

const lookup = await client.callTool({
  name: 'call_agent',
  arguments: { agent: 'holon-labs/company-lookup', input: { name: 'Globex GmbH' } },
});
seen.lookup = { isError: lookup.isError ?? false, structured: lookup.structuredContent };
seen.forms = forms;

const missing = await client.callTool({ name: 'call_agent', arguments: { agent: 'test-lab/nobody', input: {} } });
seen.missing = { isError: missing.isError ?? false, structured: missing.structuredContent };

const budget = await client.callTool({ name: 'get_budget', arguments: {} });
seen.budget = budget.structuredContent;

// Revoke this very key, then use the session once more.
const api = env('HOLON_API');
const del = await fetch(`${api}/v0/keys/${env('HOLON_KEY_PREFIX')}`, {
  method: 'DELETE',
  headers: { Authorization: `Bearer ${env('HOLON_HUMAN_KEY')}` },
});
seen.revoked = del.status;
try {
  await client.callTool({ name: 'get_budget', arguments: {} });
  seen.afterRevoke = 'no error';
} catch (err) {
  seen.afterRevoke = { name: err.constructor.name, code: err.code ?? null, message: String(err.message) };
}

await client.close();
process.stdout.write(JSON.stringify(seen) + '\n');
