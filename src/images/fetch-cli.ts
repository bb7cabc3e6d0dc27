import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { BerthError } from '../base/errors.js';
import type { AgentCli } from './agent-clis.js';
import { megabytes, secondsSince, withHeartbeat } from './progress.js';

const run = promisify(execFile);

/** Subresource Integrity of a file, as npm writes it: "sha512-<base64>". */
export async function fileIntegrity(file: string): Promise<string> {
  const hash = createHash('sha512');
  for await (const chunk of fs.createReadStream(file)) hash.update(chunk as Buffer);
  return `sha512-${hash.digest('base64')}`;
}

/**
 * The CLI's npm tarball in the cache, downloaded once. Every use checks it against the pinned
 * integrity (npm pack also checks a download against the registry's own record).
 */
export async function fetchCliTarball(cli: AgentCli, cacheDir: string, onProgress: (line: string) => void): Promise<string> {
  const label = `${cli.name} ${cli.version}`;
  const cached = join(cacheDir, `${cli.name}-${cli.version}.tgz`);
  if (fs.existsSync(cached)) {
    if ((await fileIntegrity(cached)) === cli.integrity) {
      onProgress(`${label}: cached (${cached}, integrity checked)`);
      return cached;
    }
    onProgress(`${label}: cached tarball does not match the pinned integrity, downloading again`);
    fs.rmSync(cached);
  }
  fs.mkdirSync(cacheDir, { recursive: true, mode: 0o700 });
  // A private directory next to the cache, so a half-written tarball is never taken as cached.
  const staging = fs.mkdtempSync(join(cacheDir, '.pack-'));
  try {
    const started = Date.now();
    onProgress(`${label}: downloading ${cli.spec} from the npm registry (about 170 MB) ...`);
    let stdout: string;
    try {
      ({ stdout } = await withHeartbeat(label, 'downloading', onProgress, () =>
        run('npm', ['pack', cli.spec, '--pack-destination', staging, '--json', '--loglevel=error'], {
          cwd: staging,
          maxBuffer: 16 * 1024 * 1024,
        }),
      ));
    } catch (err) {
      throw new BerthError('IMAGE_MISSING', `could not download ${cli.spec}: ${gistOf(err)}`, {
        hint: 'the agent image needs npm and the npm registry once; later builds use the cache',
      });
    }
    const [packed] = JSON.parse(stdout) as Array<{ filename: string; size: number }>;
    const file = join(staging, packed?.filename ?? '');
    if (!packed || !fs.existsSync(file)) throw new BerthError('IMAGE_MISSING', `npm pack ${cli.spec} wrote no tarball`);
    const integrity = await fileIntegrity(file);
    if (integrity !== cli.integrity) {
      throw new BerthError('IMAGE_MISSING', `${cli.spec} does not match its pinned integrity (got ${integrity})`, {
        hint: 'the registry served other bytes than were pinned in src/images/agent-clis.ts',
      });
    }
    fs.renameSync(file, cached);
    onProgress(`${label}: downloaded ${megabytes(packed.size)} in ${secondsSince(started)}`);
    return cached;
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
}

/** Copy the CLI's binaries out of its tarball into `dir` (each as its `binary`, mode kept); their paths. */
export async function extractCliBinaries(cli: AgentCli, tarball: string, dir: string): Promise<string[]> {
  const scratch = fs.mkdtempSync(join(dir, '.extract-'));
  const paths = cli.binaries.map((b) => b.pathInTarball);
  try {
    await run('tar', ['-xzf', tarball, '-C', scratch, '--no-same-owner', '--', ...paths]);
    return cli.binaries.map(({ pathInTarball, binary }) => {
      const out = join(dir, binary);
      fs.renameSync(join(scratch, pathInTarball), out);
      return out;
    });
  } catch (err) {
    throw new BerthError('IMAGE_MISSING', `could not extract ${paths.join(', ')} from ${tarball}: ${gistOf(err)}`);
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}

/** The gist of a failed command: its first two lines of errors (npm's first is only a code). */
function gistOf(err: unknown): string {
  const e = err as { stderr?: string; message?: string };
  const lines = (e.stderr?.trim() || e.message || String(err)).split('\n');
  return lines.filter((l) => l.trim() && !/^npm warn/i.test(l)).slice(0, 2).join('; ');
}
