import { createHmac, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { dirname } from 'node:path';
import { errnoOf } from '../base/errors.js';

/** The per-installation secret that workspace ids are derived with (0600, created once). */
export function loadOrCreateSecret(file: string): Buffer {
  fs.mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  try {
    const fd = fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o600);
    try {
      fs.writeFileSync(fd, randomBytes(32).toString('hex'));
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  } catch (err) {
    if (errnoOf(err) !== 'EEXIST') throw err;
  }
  // Another process may have just created it: wait for the content rather than read a partial file.
  for (let i = 0; i < 50; i++) {
    const hex = fs.readFileSync(file, 'utf8').trim();
    if (/^[0-9a-f]{64}$/.test(hex)) return Buffer.from(hex, 'hex');
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
  }
  throw new Error(`${file} does not hold a valid secret; remove it to make a new one (workspace ids will change)`);
}

/**
 * A tenant key (any string: "signal:+49…", "web:alice") → its workspace id. Stable for the
 * tenant, not computable without the secret, and never derived from the key's characters,
 * so a key that looks like a path cannot name one.
 */
export function workspaceIdFor(secret: Buffer, project: string, tenantKey: string): string {
  return createHmac('sha256', secret).update(`workspace\0${project}\0${tenantKey}`).digest('hex').slice(0, 32);
}

/**
 * The author of a memory entry as every reader of /memory sees it: stable per tenant and
 * project, not the tenant key (a phone number) and not its workspace id (which would let a
 * reader address the author's folder).
 */
export function memoryAuthorFor(secret: Buffer, project: string, tenantKey: string): string {
  return `a-${createHmac('sha256', secret).update(`memory-author\0${project}\0${tenantKey}`).digest('hex').slice(0, 16)}`;
}
