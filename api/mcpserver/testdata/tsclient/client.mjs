// The official MCP TypeScript SDK as a client of Switchboard's MCP server,
// run by api/mcpserver's TestTypeScriptClient. The SDK's client validates a
// tool result's structuredContent against the tool's outputSchema, as the
// MCP Inspector does.
//
// Usage: node client.mjs <mcp url> <bearer credential> <plan json>
// where the plan is {"calls": [{"name": "...", "arguments": {...}}, ...],
// "methods": ["prompts/list", ...]}. It prints one JSON object: the server's
// capabilities and instructions, the tools listed (with their schemas), each call's result or
// thrown error, and each raw method's result or error.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { z } from "zod";

const [url, credential, planJSON] = process.argv.slice(2);
const plan = JSON.parse(planJSON);

const client = new Client({ name: "switchboard-tsclient-test", version: "0.0.1" });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${credential}` } },
});

function failure(err) {
  return { message: String(err?.message ?? err), code: err?.code ?? null };
}

const out = { calls: [], methods: [] };
try {
  await client.connect(transport);
  out.capabilities = client.getServerCapabilities() ?? null;
  out.instructions = client.getInstructions() ?? null;
  const listed = await client.listTools();
  out.tools = listed.tools.map((t) => t.name);
  out.schemas = Object.fromEntries(listed.tools.map((t) => [t.name, { input: t.inputSchema, output: t.outputSchema ?? null }]));
  for (const call of plan.calls ?? []) {
    try {
      const result = await client.callTool({ name: call.name, arguments: call.arguments ?? {} });
      out.calls.push({ name: call.name, result });
    } catch (err) {
      out.calls.push({ name: call.name, error: failure(err) });
    }
  }
  for (const method of plan.methods ?? []) {
    try {
      const result = await client.request({ method, params: {} }, z.object({}).passthrough());
      out.methods.push({ method, result });
    } catch (err) {
      out.methods.push({ method, error: failure(err) });
    }
  }
} catch (err) {
  out.fatal = failure(err);
} finally {
  await client.close().catch(() => {});
}
process.stdout.write(JSON.stringify(out) + "\n");
