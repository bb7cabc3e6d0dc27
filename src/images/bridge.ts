import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { BerthError } from '../base/errors.js';

export const IMAGES_DIR = fileURLToPath(new URL('../../images/', import.meta.url));

/** berth-bridge: a static binary, so it runs in any image (scratch included). */
export function compileBridge(source: string, output: string): void {
  try {
    execFileSync('gcc', ['-static', '-O2', '-s', '-o', output, source], { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (err) {
    throw new BerthError('IMAGE_MISSING', `could not compile berth-bridge: ${(err as Error).message.split('\n')[0]}`, {
      hint: 'install a C compiler: apt-get install -y gcc libc6-dev',
    });
  }
}
