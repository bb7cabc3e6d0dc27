import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { join } from 'node:path';
import type { SecretEntry } from '../config/secrets.js';
import { BerthError, errnoOf } from '../base/errors.js';
import { atomicWriteFile } from '../fs/tree.js';

/**
 * The values of brokered secrets, read where berth.yaml says (a 0600 file, berth's own
 * environment, a command) when the egress proxy needs one, and `berth secret set --stdin`'s
 * own store: one 0600 file per secret in berth's private state. A value never goes to a log,
 * an error message or a container.
 */
const MAX_VALUE = 8192;
/** A header value's characters: a value with a newline could add headers of its own. */
const VALUE = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/;
const COMMAND_TIMEOUT_MS = 10_000;

function checked(name: string, raw: string, from: string): string {
  const value = raw.replace(/\s+$/, '');
  if (!value) throw new BerthError('SECRET_UNAVAILABLE', `secret ${name}: ${from} is empty`);
  if (value.length > MAX_VALUE || !VALUE.test(value)) {
    throw new BerthError(
      'SECRET_UNAVAILABLE',
      `secret ${name}: ${from} must hold one line of at most ${MAX_VALUE} printable ASCII characters`,
    );
  }
  return value;
}

/** A secret file as berth accepts it: a regular file no one but its owner (berth's user) may read. */
export function readSecretFile(name: string, path: string): string {
  let fd: number;
  try {
    fd = fs.openSync(path, fs.constants.O_RDONLY | fs.constants.O_NOCTTY | fs.constants.O_NONBLOCK);
  } catch (err) {
    throw new BerthError('SECRET_UNAVAILABLE', `secret ${name}: its file ${path} cannot be read (${errnoOf(err) ?? 'error'})`);
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw new BerthError('SECRET_UNAVAILABLE', `secret ${name}: ${path} is not a regular file`);
    if (st.mode & 0o077)
      throw new BerthError('SECRET_UNAVAILABLE', `secret ${name}: ${path} may be read by others (mode ${(st.mode & 0o777).toString(8)})`, {
        hint: `chmod 600 ${path}`,
      });
    if (typeof process.getuid === 'function' && st.uid !== process.getuid())
      throw new BerthError('SECRET_UNAVAILABLE', `secret ${name}: ${path} belongs to another user (uid ${st.uid})`);
    if (st.size > MAX_VALUE + 2) throw new BerthError('SECRET_UNAVAILABLE', `secret ${name}: ${path} is larger than ${MAX_VALUE} bytes`);
    return checked(name, fs.readFileSync(fd, 'latin1'), `its file ${path}`);
  } finally {
    fs.closeSync(fd);
  }
}

export interface SecretValues {
  /** The value, or SECRET_UNAVAILABLE saying why not (never the value). */
  get(name: string, entry: SecretEntry): Promise<string>;
}

export function createSecretValues(env: NodeJS.ProcessEnv = process.env): SecretValues {
  const files = new Map<string, { stamp: string; value: string }>();
  const commands = new Map<string, { key: string; until: number; value: Promise<string> }>();

  function fromFile(name: string, path: string): string {
    let stamp: string;
    try {
      const st = fs.statSync(path);
      stamp = `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}:${st.mode}`;
    } catch (err) {
      throw new BerthError('SECRET_UNAVAILABLE', `secret ${name}: its file ${path} cannot be read (${errnoOf(err) ?? 'error'})`);
    }
    const known = files.get(name);
    if (known?.stamp === `${path}|${stamp}`) return known.value;
    const value = readSecretFile(name, path);
    files.set(name, { stamp: `${path}|${stamp}`, value });
    return value;
  }

  function fromCommand(name: string, argv: string[], refreshMs: number): Promise<string> {
    const key = JSON.stringify(argv);
    const known = commands.get(name);
    if (known && known.key === key && known.until > Date.now()) return known.value;
    const value = new Promise<string>((resolve, reject) => {
      execFile(
        argv[0] as string,
        argv.slice(1),
        { timeout: COMMAND_TIMEOUT_MS, maxBuffer: MAX_VALUE * 2, encoding: 'latin1', env },
        (err, stdout) => {
          if (err) {
            const why = (err as { killed?: boolean }).killed
              ? `took longer than ${COMMAND_TIMEOUT_MS / 1000} s`
              : `failed (${(err as NodeJS.ErrnoException).code ?? 'error'})`;
            reject(new BerthError('SECRET_UNAVAILABLE', `secret ${name}: its command ${argv[0]} ${why}`));
          } else {
            try {
              resolve(checked(name, stdout, `the output of ${argv[0]}`));
            } catch (e) {
              reject(e);
            }
          }
        },
      );
    });
    commands.set(name, { key, until: Date.now() + refreshMs, value });
    // A failure is not kept: the next request asks again.
    value.catch(() => {
      if (commands.get(name)?.value === value) commands.delete(name);
    });
    return value;
  }

  return {
    async get(name, entry) {
      if (entry.file !== undefined) return fromFile(name, entry.file);
      if (entry.env !== undefined) {
        const raw = Object.hasOwn(env, entry.env) ? env[entry.env] : undefined;
        if (raw === undefined) throw new BerthError('SECRET_UNAVAILABLE', `secret ${name}: berth's environment has no ${entry.env}`);
        return checked(name, raw, `$${entry.env}`);
      }
      return fromCommand(name, entry.command ?? [], entry.refresh_seconds * 1000);
    },
  };
}

/** Where `berth secret set --stdin` keeps values: berth's private state, 0700, never mounted. */
export function storedSecretsDir(stateDir: string): string {
  return join(stateDir, 'secrets');
}

/** Write a value into berth's own store (0600, atomically); returns the file's path. */
export function storeSecretValue(stateDir: string, name: string, raw: string): string {
  const value = checked(name, raw, 'the value given');
  const dir = storedSecretsDir(stateDir);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.chmodSync(dir, 0o700);
  const file = join(dir, name);
  atomicWriteFile(file, `${value}\n`, 0o600);
  return file;
}

/** Remove a value from berth's own store; other files are the operator's and stay. */
export function removeStoredSecret(stateDir: string, path: string | undefined): boolean {
  if (path === undefined || !path.startsWith(`${storedSecretsDir(stateDir)}/`)) return false;
  fs.rmSync(path, { force: true });
  return true;
}
