import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * bin/berth.js on an end-of-life node (Node 20): it hands over to the Node 24 that setup puts in
 * .node/ (scripts/ensure-node.sh), with the same arguments and exit status, or says what to do.
 * The old node is this one told it is 20.0.0; the ".node" one a script that reports how it ran.
 */
const BIN = fileURLToPath(new URL('../../bin/berth.js', import.meta.url));
const OLD = ['--import', 'data:text/javascript,Object.defineProperty(process.versions,"node",{value:"20.0.0"})'];
const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-handover-'));
fs.mkdirSync(join(dir, 'bin'));
fs.copyFileSync(BIN, join(dir, 'bin', 'berth.js'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const start = (...args: string[]) => spawnSync(process.execPath, [...OLD, join(dir, 'bin', 'berth.js'), ...args], { encoding: 'utf8' });

describe('berth on an end-of-life node', () => {
  it('without .node/: nothing of berth runs; it says which node it needs and how to get it (exit 70)', () => {
    const r = start('--version');
    expect(r.status).toBe(70);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe('berth: needs Node 22.19 or newer, this is v20.0.0 (end-of-life); "make setup" installs Node 24 into .node/\n');
  });

  it('with .node/: the same command runs on that node, with its arguments, and ends with its status', () => {
    fs.mkdirSync(join(dir, '.node', 'bin'), { recursive: true });
    fs.writeFileSync(join(dir, '.node', 'bin', 'node'), '#!/bin/sh\necho "ran: $*"\nexit 7\n', { mode: 0o755 });
    const r = start('run', 'demo', '--user', 'web:a b', '--', 'echo hi');
    expect(r.stdout).toBe(`ran: ${join(dir, 'bin', 'berth.js')} run demo --user web:a b -- echo hi\n`);
    expect(r.status).toBe(7);
  });
});
