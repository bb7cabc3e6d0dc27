import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';

/**
 * test/fixtures/pidat.c: a process at exactly `pid`, in the mount namespace of process `nsPid`,
 * standing for PID reuse (root only). Retried for a moment while the number is still being freed.
 */
export async function pidAt(pid: number, nsPid: number, seconds = 600): Promise<{ pid: number; kill(): void }> {
  const source = join(import.meta.dirname, '..', 'fixtures', 'pidat.c');
  const bin = join(os.tmpdir(), `berth-test-pidat-${fs.statSync(source).mtimeMs}`);
  if (!fs.existsSync(bin)) {
    execFileSync('gcc', ['-O2', '-o', `${bin}.tmp`, source]);
    fs.renameSync(`${bin}.tmp`, bin);
  }
  for (let attempt = 0; ; attempt++) {
    const r = spawnSync(bin, [String(pid), String(nsPid), String(seconds)], { encoding: 'utf8' });
    if (r.status === 0) {
      const held = Number(r.stdout.trim());
      const kill = () => {
        try {
          process.kill(held, 'SIGKILL');
        } catch {
          // already gone
        }
      };
      return { pid: held, kill };
    }
    if (attempt >= 100) throw new Error(`pidat ${pid}: ${r.stderr.trim()} (status ${r.status})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
