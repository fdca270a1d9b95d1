// A small stdio MCP server for the client's tests, built on the official SDK that the
// reference servers bring along: `whoami` answers the client's name and version as sent in
// `initialize`, and `add-tool` registers a tool `added`, so the SDK sends
// `notifications/tools/list_changed`.
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";

const server = new McpServer(
  { name: "probe", version: "1.0.0" },
  { capabilities: { tools: { listChanged: true } } },
);

server.registerTool(
  "whoami",
  { description: "The client's name and version", inputSchema: {} },
  async () => {
    const client = server.server.getClientVersion() ?? {};
    return { content: [{ type: "text", text: `${client.name} ${client.version}` }] };
  },
);

server.registerTool(
  "add-tool",
  { description: "Registers the tool `added`", inputSchema: {} },
  async () => {
    server.registerTool(
      "added",
      { description: "Registered after the first listing", inputSchema: {} },
      async () => ({ content: [{ type: "text", text: "added answers" }] }),
    );
    return { content: [{ type: "text", text: "registered" }] };
  },
);

await server.connect(new StdioServerTransport());
