// A server built with the official TypeScript SDK 1.x (McpServer), for the
// old-server interop matrix.
//
//   node ts_sdk1_server.mjs SDK_DIR stdio
//   node ts_sdk1_server.mjs SDK_DIR sse PORT   # HTTP+SSE: GET /sse, POST /messages
//
// SDK_DIR is the npm prefix old_peers.py installed the pinned SDK into: the
// packages are resolved from there, not from beside this file, so the
// checkout needs no node_modules of its own. The HTTP side is plain node:http
// wired the way the SDK's own SSE example does it (one SSEServerTransport per
// GET, POSTs routed by ?sessionId=), so a POST to /sse gets the 404 a real
// deployment answers with, which is what the client's fallback keys on.
import http from "node:http";
import { createRequire } from "node:module";
import path from "node:path";

const [sdkDir, transport = "stdio", port = "0"] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(sdkDir), "package.json"));
const { McpServer, ResourceTemplate } = require("@modelcontextprotocol/sdk/server/mcp.js");
const { StdioServerTransport } = require("@modelcontextprotocol/sdk/server/stdio.js");
const { SSEServerTransport } = require("@modelcontextprotocol/sdk/server/sse.js");
const { z } = require("zod");

function build() {
  const server = new McpServer(
    { name: "ts-sdk1-peer", version: "1.0.0" },
    { instructions: "A TypeScript SDK 1.x server for interop tests." },
  );
  const text = (t) => ({ content: [{ type: "text", text: String(t) }] });
  server.tool("add", "Add two integers.", { a: z.number().int(), b: z.number().int() },
    { readOnlyHint: true, idempotentHint: true }, async ({ a, b }) => text(a + b));
  server.tool("shout", "Upper-case the text.", { text: z.string() }, async ({ text: t }) => text(t.toUpperCase()));
  server.tool("steps", "Report n progress steps, then finish.", { n: z.number().int() }, async ({ n }, extra) => {
    const token = extra._meta?.progressToken;
    for (let i = 1; i <= n; i++) {
      if (token !== undefined) {
        await extra.sendNotification({ method: "notifications/progress", params: { progressToken: token, progress: i, total: n } });
      }
    }
    return text(`did ${n} steps`);
  });
  server.tool("broken", "Always fails.", async () => { throw new Error("this tool always fails"); });
  server.tool("beep", "A short sound (audio content is new in 2025-03-26).", async () => ({
    content: [{ type: "audio", data: "UklGRg==", mimeType: "audio/wav" }],
  }));
  // This SDK sends outputSchema and structuredContent before the revision
  // that defines them (2025-06-18), whatever version it negotiated.
  server.registerTool("divide", {
    description: "Divide a by b, with a structured result.",
    inputSchema: { a: z.number(), b: z.number() },
    outputSchema: { quotient: z.number() },
  }, async ({ a, b }) => ({ ...text(a / b), structuredContent: { quotient: a / b } }));
  server.resource("hello", "note://hello", { mimeType: "text/plain" }, async (uri) => ({
    contents: [{ uri: uri.href, mimeType: "text/plain", text: "hello from the TypeScript SDK 1.x" }],
  }));
  server.resource("item", new ResourceTemplate("note://items/{item}", { list: undefined }), async (uri, { item }) => ({
    contents: [{ uri: uri.href, text: `item ${item}` }],
  }));
  server.prompt("review", "Ask for a review.", { code: z.string() }, ({ code }) => ({
    messages: [{ role: "user", content: { type: "text", text: `Please review:\n${code}` } }],
  }));
  return server;
}

if (transport === "stdio") {
  await build().connect(new StdioServerTransport());
} else if (transport === "sse") {
  const sessions = new Map();
  const httpServer = http.createServer(async (req, res) => {
    const url = new URL(req.url, "http://127.0.0.1");
    try {
      if (req.method === "GET" && url.pathname === "/sse") {
        const sse = new SSEServerTransport("/messages", res);
        sessions.set(sse.sessionId, sse);
        res.on("close", () => sessions.delete(sse.sessionId));
        await build().connect(sse);
      } else if (req.method === "POST" && url.pathname === "/messages") {
        const sse = sessions.get(url.searchParams.get("sessionId"));
        if (sse) await sse.handlePostMessage(req, res);
        else res.writeHead(404).end("unknown session");
      } else {
        res.writeHead(404).end("not found");
      }
    } catch (err) {
      if (!res.headersSent) res.writeHead(500).end(String(err));
    }
  });
  httpServer.listen(Number(port), "127.0.0.1");
} else {
  console.error(`unknown transport ${transport}`);
  process.exit(2);
}
