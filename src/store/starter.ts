/** Starter files of a new project; the admin edits them afterwards. */
export function starterFiles(name: string): Record<string, string> {
  return {
    'AGENTS.md': `# ${name}

You are an agent run by berth for one person or group (a tenant).
Your working directory is your tenant's workspace; keep your files there.
Some paths may be read-only: the operator protects them, and writing them fails on purpose.
`,
    '.factory/settings.json': `${JSON.stringify({}, null, 2)}\n`,
    // berth's file tools: the image's berth-bridge speaks MCP over this run's gateway socket.
    '.factory/mcp.json': `${JSON.stringify({ mcpServers: { berth: { command: 'berth-bridge', args: ['/run/berth/gateway.sock'] } } }, null, 2)}\n`,
  };
}
