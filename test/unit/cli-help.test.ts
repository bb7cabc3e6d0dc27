import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli-main.js';

/** The CLI's help by command group, and times given as spans (first hour: "berth project --help" was an unknown command). */
const home = fs.mkdtempSync(join(os.tmpdir(), 'berth-cli-help-'));
afterAll(() => fs.rmSync(home, { recursive: true, force: true }));

describe('berth <group> --help', () => {
  it('lists the group\'s commands with their synopsis (exit 0), as "berth help <group>" does', async () => {
    const r = await runCli(['project', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^The "project" commands:\n {2}berth project create <name> /);
    for (const sub of ['create', 'update', 'delete', 'get', 'list', 'grant', 'revoke'])
      expect(r.stdout).toContain(`\n  berth project ${sub} `);
    expect((await runCli(['help', 'project'])).stdout).toBe(r.stdout);
    expect((await runCli(['project'])).stdout).toBe(r.stdout);
  });

  it('an unknown command of a group names the ones it has (exit 64)', async () => {
    const r = await runCli(['project', 'frob']);
    expect(r.code).toBe(64);
    expect(r.stderr).toBe(
      'USAGE: unknown command "project frob" ("berth project --help" lists its commands: create, update, delete, get, list, show, grant, revoke, set-private-workspace, unset-private-workspace, pause, resume)\n',
    );
  });

  it('a command that heads a group lists the others in its help', async () => {
    expect((await runCli(['chat-link', '--help'])).stdout).toMatch(
      /\nRelated:\n {2}berth chat-link logins .*\n {2}berth chat-link revoke /,
    );
  });
});

describe('berth audit --since', () => {
  it('takes a span back from now (10m, 2h, 7d) as well as an ISO time; anything else is refused naming both forms', async () => {
    expect((await runCli(['--home', home, 'project', 'create', 'spanned'])).code).toBe(0);
    expect((await runCli(['--home', home, 'audit', '--since', '10m'])).stdout).toMatch(/project\.create {2}operator {2}spanned {2}ok/);
    expect((await runCli(['--home', home, 'audit', '--since', new Date(Date.now() + 3_600_000).toISOString()])).stdout).toBe(
      'no audit events match\n',
    );
    const bad = await runCli(['--home', home, 'audit', '--since', '10x']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('since: must be an ISO 8601 time (2026-11-23T00:00:00Z) or a span back from now (90s, 10m, 2h, 7d)');
  });
});
