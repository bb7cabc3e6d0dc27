import { PassThrough } from 'node:stream';
import Docker from 'dockerode';
import { beforeAll, describe, expect, it } from 'vitest';

/**
 * The real-agent image as berth runs it: read-only root, no network, uid 10001, no
 * capabilities, no-new-privileges, a tmpfs /tmp, typed mounts only. Built offline by
 * "node bin/berth.js images build agent" (make test does it first); missing is a failure.
 */
const IMAGE = 'berth/agent:latest';
const docker = new Docker();

interface Result {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** One hardened container per command; removed afterwards. */
async function inAgentImage(cmd: string[]): Promise<Result> {
  const container = await docker.createContainer({
    Image: IMAGE,
    Cmd: cmd,
    User: '10001:10001',
    Labels: { 'berth.test': 'agent-image' },
    HostConfig: {
      ReadonlyRootfs: true,
      NetworkMode: 'none',
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      Mounts: [
        { Type: 'tmpfs', Target: '/tmp', TmpfsOptions: { SizeBytes: 64 * 1024 * 1024, Mode: 0o1777 } },
      ] as unknown as Docker.MountConfig,
    },
  });
  try {
    const stream = await container.attach({ stream: true, stdout: true, stderr: true });
    const out = new PassThrough();
    const err = new PassThrough();
    const chunks = { out: [] as Buffer[], err: [] as Buffer[] };
    out.on('data', (c: Buffer) => chunks.out.push(c));
    err.on('data', (c: Buffer) => chunks.err.push(c));
    docker.modem.demuxStream(stream, out, err);
    const ended = new Promise((resolve) => stream.on('end', resolve));
    await container.start();
    const { StatusCode } = (await container.wait()) as { StatusCode: number };
    await ended;
    return { exitCode: StatusCode, stdout: Buffer.concat(chunks.out).toString(), stderr: Buffer.concat(chunks.err).toString() };
  } finally {
    await container.remove({ force: true });
  }
}

beforeAll(async () => {
  try {
    await docker.getImage(IMAGE).inspect();
  } catch {
    throw new Error(`${IMAGE} is missing: build it with "node bin/berth.js images build agent" (make test does).`);
  }
});

describe('agent image, run with berth hardening', () => {
  it('claude is the pinned Claude Code', async () => {
    const r = await inAgentImage(['claude', '--version']);
    expect(r, r.stderr).toMatchObject({ exitCode: 0 });
    expect(r.stdout).toContain('2.1.330');
  });

  it('codex is the pinned Codex', async () => {
    const r = await inAgentImage(['codex', '--version']);
    expect(r, r.stderr).toMatchObject({ exitCode: 0 });
    expect(r.stdout).toContain('0.169.0');
  });

  it('git, ripgrep and a shell work', async () => {
    expect((await inAgentImage(['git', '--version'])).stdout).toMatch(/^git version \d/);
    expect((await inAgentImage(['rg', '--version'])).stdout).toMatch(/^ripgrep \d/);
    expect(await inAgentImage(['sh', '-c', 'echo ok'])).toEqual({ exitCode: 0, stdout: 'ok\n', stderr: '' });
  });

  it('runs as 10001 with its home, CA certificates and berth-bridge in place', async () => {
    const r = await inAgentImage([
      'sh',
      '-c',
      'id -u; id -g; echo "$HOME"; pwd; stat -c "%u %a" /home/agent /workspace /tmp; ' +
        'test -s /etc/ssl/certs/ca-certificates.crt && echo certs; test -x /usr/local/bin/berth-bridge && echo bridge',
    ]);
    expect(r.stdout.split('\n')).toEqual([
      '10001',
      '10001',
      '/home/agent',
      '/workspace',
      '10001 700',
      '10001 755',
      '0 1777',
      'certs',
      'bridge',
      '',
    ]);
  });

  it('the root filesystem is read-only, even where the agent owns the directory; /tmp is writable', async () => {
    const r = await inAgentImage([
      'sh',
      '-c',
      'for f in /probe /workspace/probe /home/agent/probe; do echo x > $f; done; echo x > /tmp/probe && cat /tmp/probe',
    ]);
    for (const f of ['/probe', '/workspace/probe', '/home/agent/probe']) expect(r.stderr).toContain(`${f}: Read-only file system`);
    expect(r.stdout).toBe('x\n');
  });
});
