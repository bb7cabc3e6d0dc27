import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { AGENT_BASE_IMAGE } from '../../src/images/agent-base.js';
import { AGENT_CLIS, type AgentCli } from '../../src/images/agent-clis.js';
import { IMAGES_DIR } from '../../src/images/bridge.js';
import { fetchCliTarball, fileIntegrity } from '../../src/images/fetch-cli.js';
import { imageInputsHash, INPUTS_LABEL, type ImageInputs } from '../../src/images/image-inputs.js';
import { withHeartbeat } from '../../src/images/progress.js';

const inputs: ImageInputs = { dockerfile: 'FROM x\n', clis: AGENT_CLIS, bridgeSource: 'int main(){}', baseId: 'sha256:aaa' };

describe('imageInputsHash (is the agent image up to date?)', () => {
  it('is stable for the same inputs', () => {
    expect(imageInputsHash({ ...inputs, clis: [...AGENT_CLIS] })).toBe(imageInputsHash(inputs));
    expect(imageInputsHash(inputs)).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it.each([
    ['the Dockerfile', { dockerfile: 'FROM y\n' }],
    ['berth-bridge', { bridgeSource: 'int main(){return 1;}' }],
    ['the base image id', { baseId: 'sha256:bbb' }],
    ['a CLI pin', { clis: [{ ...AGENT_CLIS[0], spec: 'x@2', integrity: 'sha512-other' } as AgentCli, ...AGENT_CLIS.slice(1)] }],
    ['the set of CLIs', { clis: AGENT_CLIS.slice(1) }],
  ])('changes when %s changes', (_what, change) => {
    expect(imageInputsHash({ ...inputs, ...change })).not.toBe(imageInputsHash(inputs));
  });

  it('does not confuse where one input ends and the next begins', () => {
    expect(imageInputsHash({ ...inputs, dockerfile: 'ab', bridgeSource: 'c' })).not.toBe(
      imageInputsHash({ ...inputs, dockerfile: 'a', bridgeSource: 'bc' }),
    );
  });

  it('is what the Dockerfile labels the image with, on the default base', () => {
    const dockerfile = fs.readFileSync(join(IMAGES_DIR, 'agent', 'Dockerfile'), 'utf8');
    expect(dockerfile).toContain(`ARG BASE=${AGENT_BASE_IMAGE}\n`);
    expect(dockerfile).toContain(`LABEL ${INPUTS_LABEL}=\${BERTH_INPUTS}\n`);
  });
});

describe('fetchCliTarball cache', () => {
  const cli = (integrity: string): AgentCli => ({
    name: 'fake',
    // A local path npm cannot pack: a download attempt fails at once, with no network.
    spec: 'file:/nonexistent/berth-fake-cli',
    version: '1.0.0',
    integrity,
    binaries: [{ pathInTarball: 'package/fake', binary: 'fake' }],
  });

  it("fileIntegrity is npm's sha512 form", async () => {
    const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-cli-cache-'));
    fs.writeFileSync(join(dir, 'f'), 'abc');
    expect(await fileIntegrity(join(dir, 'f'))).toBe(`sha512-${createHash('sha512').update('abc').digest('base64')}`);
    fs.rmSync(dir, { recursive: true });
  });

  it('uses a cached tarball that matches the pin, without downloading', async () => {
    const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-cli-cache-'));
    const cached = join(dir, 'fake-1.0.0.tgz');
    fs.writeFileSync(cached, 'tarball bytes');
    const lines: string[] = [];
    expect(await fetchCliTarball(cli(await fileIntegrity(cached)), dir, (l) => lines.push(l))).toBe(cached);
    expect(lines).toEqual([`fake 1.0.0: cached (${cached}, integrity checked)`]);
    fs.rmSync(dir, { recursive: true });
  });

  it('throws away a cached tarball that does not match the pin', async () => {
    const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-cli-cache-'));
    const cached = join(dir, 'fake-1.0.0.tgz');
    fs.writeFileSync(cached, 'tampered bytes');
    await expect(fetchCliTarball(cli('sha512-pinned'), dir, () => {})).rejects.toMatchObject({ code: 'IMAGE_MISSING' });
    expect(fs.readdirSync(dir)).toEqual([]);
    fs.rmSync(dir, { recursive: true });
  });
});

describe('a long build step says it is still going', () => {
  it('withHeartbeat: a line per interval while the work lasts, none after it ended', async () => {
    vi.useFakeTimers();
    try {
      const lines: string[] = [];
      let finish!: (v: string) => void;
      const done = withHeartbeat(
        'codex 0.169.0',
        'downloading',
        (l) => lines.push(l),
        () => new Promise<string>((r) => (finish = r)),
        10_000,
      );
      await vi.advanceTimersByTimeAsync(25_000);
      expect(lines).toEqual(['codex 0.169.0: still downloading (10 s)', 'codex 0.169.0: still downloading (20 s)']);
      finish('tarball');
      await expect(done).resolves.toBe('tarball');
      await vi.advanceTimersByTimeAsync(30_000);
      expect(lines).toHaveLength(2);
    } finally {
      vi.useRealTimers();
    }
  });

  it('a failed step stops its heartbeat too', async () => {
    vi.useFakeTimers();
    try {
      const lines: string[] = [];
      await expect(
        withHeartbeat(
          'base',
          'importing',
          (l) => lines.push(l),
          () => Promise.reject(new Error('no engine')),
          10_000,
        ),
      ).rejects.toThrow('no engine');
      await vi.advanceTimersByTimeAsync(30_000);
      expect(lines).toEqual([]);
    } finally {
      vi.useRealTimers();
    }
  });
});
