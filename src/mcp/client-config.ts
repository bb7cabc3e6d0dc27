import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * The entry an MCP client (Claude Desktop, Cursor, an agent's mcp.json) needs to start this
 * install's `berth mcp`: absolute paths only. `npx berth` outside this checkout fetches whatever
 * public npm package is named "berth", and a bare `node` depends on the client's PATH (clients
 * often start servers with a minimal one): neither may decide which program gets the admin tools.
 */
export interface McpClientConfig {
  mcpServers: { berth: { command: string; args: string[] } };
}

export function mcpClientConfig(install: { node: string; bin: string; home: string }): McpClientConfig {
  return { mcpServers: { berth: { command: install.node, args: [install.bin, '--home', install.home, 'mcp'] } } };
}

/** This install's bin/berth.js, links resolved (a global install's `berth` is a link to it). */
export function installedBin(): string {
  return fs.realpathSync(fileURLToPath(new URL('../../bin/berth.js', import.meta.url)));
}
