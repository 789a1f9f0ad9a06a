// An MCP agent built with the reference TypeScript SDK (its low-level
// Server, stateful Streamable HTTP sessions), for appliance/mcp_node_test.go:
// the gateway's runner calls it as it calls any author's agent. It serves
// the same tools twice, on two loopback ports: one answering calls with an
// event stream (the SDK's default), one with plain JSON
// (enableJsonResponse). It prints {"sse": url, "json": url} on stdout once
// both listen, and runs until killed.
//
//   echo       structuredContent (and a text block) = the arguments; _meta
//              says which holon/max_cost it was sent
//   hang       waits until the request is cancelled, then counts it
//   cancelled  how many hang requests were cancelled so far
import http from "node:http";
import { randomUUID } from "node:crypto";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema, isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";

let cancelled = 0;

function newServer() {
  const s = new Server({ name: "ts-agent", version: "1.0.0" }, { capabilities: { tools: {} } });
  s.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: ["echo", "hang", "cancelled"].map((name) => ({ name, inputSchema: { type: "object" } })),
  }));
  s.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    const args = req.params.arguments ?? {};
    switch (req.params.name) {
      case "echo":
        return {
          structuredContent: args,
          content: [{ type: "text", text: JSON.stringify(args) }],
          _meta: { "holon/units": 1, max_cost: req.params._meta?.["holon/max_cost"] ?? null },
        };
      case "hang":
        return await new Promise((resolve) => {
          extra.signal.addEventListener("abort", () => {
            cancelled++;
            resolve({ structuredContent: {}, content: [] });
          });
        });
      case "cancelled":
        return { structuredContent: { cancelled }, content: [{ type: "text", text: JSON.stringify({ cancelled }) }] };
    }
    return { isError: true, content: [{ type: "text", text: "no tool " + req.params.name }] };
  });
  return s;
}

function listen(enableJsonResponse) {
  const transports = new Map();
  const srv = http.createServer(async (req, res) => {
    let parsed;
    if (req.method === "POST") {
      const chunks = [];
      for await (const c of req) chunks.push(c);
      parsed = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    }
    const sid = req.headers["mcp-session-id"];
    let transport = sid ? transports.get(sid) : undefined;
    if (!transport) {
      if (sid || req.method !== "POST" || !isInitializeRequest(parsed)) {
        res.writeHead(sid ? 404 : 400, { "Content-Type": "application/json" });
        res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: "no such session" }, id: null }));
        return;
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse,
        onsessioninitialized: (id) => transports.set(id, transport),
      });
      transport.onclose = () => transports.delete(transport.sessionId);
      await newServer().connect(transport);
    }
    await transport.handleRequest(req, res, parsed);
  });
  return new Promise((resolve) => srv.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${srv.address().port}/mcp`)));
}

const [sse, json] = await Promise.all([listen(false), listen(true)]);
process.stdout.write(JSON.stringify({ sse, json }) + "\n");
