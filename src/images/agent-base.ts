import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { BerthError } from '../base/errors.js';
import type { ImageStore } from '../launch/images.js';
import { megabytes, secondsSince, withHeartbeat } from './progress.js';

/** What agents expect beyond minbase (bash is already essential). */
export const AGENT_BASE_PACKAGES = ['ca-certificates', 'git', 'curl', 'ripgrep', 'procps', 'less'];

/**
 * The agent image's default base: Debian bookworm made from Debian's packages, no registry.
 * Named by its package list, so a package added here makes a new base (and so a new agent image).
 */
export const AGENT_BASE_IMAGE = `berth/agent-base:bookworm-${createHash('sha256').update(AGENT_BASE_PACKAGES.join(',')).digest('hex').slice(0, 8)}`;

const MIRRORS = [
  'deb http://deb.debian.org/debian bookworm main',
  'deb http://deb.debian.org/debian bookworm-updates main',
  'deb http://deb.debian.org/debian-security bookworm-security main',
];

/** mmdebstrap's argv: a small bookworm (no manuals, docs or translations) as a tar file. */
export function mmdebstrapArgs(tarFile: string): string[] {
  const excluded = ['/usr/share/man/*', '/usr/share/doc/*', '/usr/share/info/*', '/usr/share/locale/*'];
  return [
    '--variant=minbase',
    `--include=${AGENT_BASE_PACKAGES.join(',')}`,
    ...excluded.map((p) => `--dpkgopt=path-exclude=${p}`),
    // Licences stay: the image is handed around.
    '--dpkgopt=path-include=/usr/share/doc/*/copyright',
    'bookworm',
    tarFile,
    ...MIRRORS,
  ];
}

/** Make the base image unless the engine has it already; returns its name. */
export async function ensureAgentBase(images: ImageStore, onProgress: (line: string) => void): Promise<string> {
  if (await images.inspect(AGENT_BASE_IMAGE)) {
    onProgress(`base: ${AGENT_BASE_IMAGE} exists, not rebuilt (docker rmi it to make it again)`);
    return AGENT_BASE_IMAGE;
  }
  const dir = fs.mkdtempSync(join(os.tmpdir(), 'berth-agent-base-'));
  try {
    const tarFile = join(dir, 'rootfs.tar');
    const started = Date.now();
    onProgress(`base: mmdebstrap bookworm with ${AGENT_BASE_PACKAGES.join(', ')} from Debian's mirrors (deb.debian.org; 35 s to several minutes) ...`);
    await withHeartbeat('base', 'fetching and unpacking Debian packages', onProgress, () => runMmdebstrap(mmdebstrapArgs(tarFile), (line) => onProgress(`base:   ${line}`)));
    onProgress(`base: root filesystem of ${megabytes(fs.statSync(tarFile).size)} in ${secondsSince(started)}`);
    const importing = Date.now();
    // Imported only once mmdebstrap succeeded, so a failed run never leaves a half base behind.
    await withHeartbeat('base', 'importing', onProgress, () => images.importTar(tarFile, AGENT_BASE_IMAGE));
    onProgress(`base: imported as ${AGENT_BASE_IMAGE} in ${secondsSince(importing)}`);
    return AGENT_BASE_IMAGE;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Run mmdebstrap (argv, no shell), passing its "I:" lines on; fail with its last words. */
function runMmdebstrap(args: string[], onLine: (line: string) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('mmdebstrap', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    const tail: string[] = [];
    let partial = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        tail.push(line);
        if (tail.length > 5) tail.shift();
        if (line.startsWith('I: ')) onLine(line.slice(3));
      }
    });
    child.on('error', (err: NodeJS.ErrnoException) => {
      reject(
        err.code === 'ENOENT'
          ? new BerthError('IMAGE_MISSING', 'mmdebstrap is not installed: it makes the agent image\'s Debian base', {
              hint: 'apt-get install -y mmdebstrap (scripts/setup.sh does it), or pass --base IMAGE',
            })
          : err,
      );
    });
    child.on('close', (code) => {
      if (code === 0) resolve();
      else reject(new BerthError('IMAGE_MISSING', `mmdebstrap failed (exit ${code}): ${tail.join(' | ').trim()}`, {
        hint: 'it needs root (or uidmap for unshare mode) and Debian\'s mirrors',
      }));
    });
  });
}
