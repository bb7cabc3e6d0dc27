import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BERTH_BIN, REPO_ROOT, cli } from '../helpers.js';

/**
 * What an MCP client is told to start for berth's admin tools. `npx berth` outside the checkout
 * fetches the public npm package named "berth" (someone else's); the printed command must name
 * this install so that nothing on the client's PATH or in its working directory can stand in.
 */
let home: string;
let elsewhere: string;

beforeAll(() => {
  home = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-mcpcfg-')));
  // A directory outside the checkout where "berth", "npx" and "node" are all impostors that leave a mark.
  elsewhere = fs.realpathSync(fs.mkdtempSync(join(os.tmpdir(), 'berth-elsewhere-')));
  const decoy = `#!/bin/sh\necho "$0 $*" >> ${elsewhere}/IMPOSTOR-RAN\n`;
  for (const dir of ['bin', 'node_modules/.bin']) {
    fs.mkdirSync(join(elsewhere, dir), { recursive: true });
    for (const name of ['berth', 'npx', 'node']) fs.writeFileSync(join(elsewhere, dir, name), decoy, { mode: 0o755 });
  }
  expect(cli(['--home', home, 'project', 'create', 'cfgtest']).code).toBe(0);
});
afterAll(() => {
  fs.rmSync(home, { recursive: true, force: true });
  fs.rmSync(elsewhere, { recursive: true, force: true });
});

describe('berth mcp --print-config', () => {
  it("names this node and this install's bin/berth.js by absolute path, and this home (never npx or a PATH lookup)", () => {
    const r = cli(['--home', home, 'mcp', '--print-config']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      mcpServers: { berth: { command: process.execPath, args: [fs.realpathSync(BERTH_BIN), '--home', home, 'mcp'] } },
    });
  });

  it('the printed command, started as an MCP client would from another directory with impostors on its PATH, answers initialize and lists this home', async () => {
    const { command, args } = (
      JSON.parse(cli(['--home', home, 'mcp', '--print-config']).stdout) as { mcpServers: { berth: { command: string; args: string[] } } }
    ).mcpServers.berth;
    const transport = new StdioClientTransport({
      command,
      args,
      cwd: elsewhere,
      env: { PATH: `${elsewhere}/node_modules/.bin:${elsewhere}/bin` },
      stderr: 'pipe',
    });
    const client = new Client({ name: 'print-config-test', version: '1.0.0' });
    try {
      await client.connect(transport);
      expect(client.getServerVersion()?.name).toBe('berth');
      const tools = await client.listTools();
      expect(tools.tools.map((t) => t.name)).toContain('project_list');
      const list = await client.callTool({ name: 'project_list', arguments: {} });
      expect(JSON.stringify(list.content)).toContain('cfgtest');
    } finally {
      await client.close();
    }
    expect(fs.existsSync(join(elsewhere, 'IMPOSTOR-RAN'))).toBe(false);
  });

  it("the API guide's MCP client config is this command and its output, not npx", () => {
    const readme = fs.readFileSync(join(REPO_ROOT, 'docs/api.md'), 'utf8');
    expect(readme).not.toMatch(/"command":\s*"npx"/);
    const snippet = /```sh\n(node bin\/berth\.js --home \/srv\/berth mcp --print-config)\n```\n```json\n(.*)\n```/.exec(readme);
    expect(snippet).not.toBeNull();
    const [, line, example] = snippet!;
    const r = spawnSync('sh', ['-c', line!.replace('/srv/berth', home)], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '' },
    });
    expect(r.status, r.stderr).toBe(0);
    const printed = JSON.parse(r.stdout) as { mcpServers: { berth: { command: string; args: string[] } } };
    const shown = JSON.parse(example!) as typeof printed;
    expect(printed.mcpServers.berth.args.slice(1)).toEqual(shown.mcpServers.berth.args.slice(1).map((a) => a.replace('/srv/berth', home)));
    for (const config of [printed, shown]) {
      expect(config.mcpServers.berth.command).toMatch(/^\/.*\/node$/);
      expect(config.mcpServers.berth.args[0]).toMatch(/^\/.*\/bin\/berth\.js$/);
    }
  });
});
