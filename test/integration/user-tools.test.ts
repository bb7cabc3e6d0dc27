import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installationId } from '../../src/main.js';
import { testHome, type TestHome } from '../helpers.js';

/**
 * Installed tools persist: what an agent installs under its session's home (~/.local/bin, where
 * pip --user, npm -g, cargo and go install put programs) runs at the session's next message, in
 * a new container, the first one gone; another session does not have it, and the image's system
 * directories stay read-only. On the shell preset (busybox), with no warm container.
 */
let h: TestHome;
const docker = new Docker();

beforeAll(() => {
  h = testHome({ warm: false, pool: 'off' });
  h.create({ name: 'tools', workspace_isolation: true });
});
afterAll(async () => {
  await h?.[Symbol.asyncDispose]();
});

const run = (message: string, sessionId: string) => h.berth.runner.run({ project: 'tools', tenantKey: 'api:ann', message, sessionId });
const ours = async () => docker.listContainers({ all: true, filters: { label: [`berth.installation=${installationId(h.home)}`] } });

describe('installed tools persist in a session', () => {
  it('a program put in ~/.local/bin at one message runs by name at the next, in a new container', async () => {
    const install = await run(
      [
        'mkdir -p ~/.local/bin',
        'printf \'#!/bin/sh\\necho made-by-message-one "$1"\\n\' > ~/.local/bin/hello-tool',
        'chmod +x ~/.local/bin/hello-tool',
        'echo "prefix=$NPM_CONFIG_PREFIX gobin=$GOBIN pip_user=$PIP_USER"',
        'touch /usr/local/bin/x 2>/dev/null && echo system-writable || echo system-read-only',
      ].join('; '),
      's1',
    );
    expect(install.exitCode, install.stderr).toBe(0);
    expect(install.stdout).toContain('prefix=/home/agent/.local gobin=/home/agent/.local/bin pip_user=1');
    expect(install.stdout).toContain('system-read-only');
    expect(await ours()).toEqual([]); // its container is gone

    const next = await run('hello-tool 42', 's1');
    expect(next.exitCode, next.stderr).toBe(0);
    expect(next.stdout).toBe('made-by-message-one 42\n');

    const other = await run('hello-tool 42', 's2');
    expect(other.exitCode).toBe(127); // another session's home: not there
  });
});
