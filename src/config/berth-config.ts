import fs from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { BerthConfigSchema, type BerthConfig } from './berth-config-schema.js';
import { BerthError, errnoOf } from '../base/errors.js';
import { fileStamp } from '../fs/json-file.js';
import { checkOperatorConfig } from './operator-checks.js';
import { parseOrThrow } from './parse.js';

export * from './berth-config-schema.js';

/** Who owns what tenants may write: the agent user, when berth runs as root (else files stay berth's). */
export function agentOwner(config: BerthConfig): { uid: number; gid: number } | undefined {
  return process.getuid?.() === 0 ? { uid: config.agent_user.uid, gid: config.agent_user.gid } : undefined;
}

/** Parse and check berth.yaml text: shape (zod) first, then the operator rules (reads fs). */
export function parseBerthConfig(text: string, file: string, home: string): BerthConfig {
  let data: unknown;
  try {
    data = parseYaml(text) ?? {};
  } catch (err) {
    throw new BerthError('CONFIG_INVALID', `${file} is not valid YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  const config = withRoutes(parseOrThrow(BerthConfigSchema, data, file), file);
  const issues = checkOperatorConfig(config, home);
  if (issues.length) throw new BerthError('CONFIG_INVALID', `${file} is invalid`, { issues });
  return config;
}

/** berth.yaml's old key `channels:` is read as `routes:` (doctor says so); both at once would be two tables. */
function withRoutes(config: BerthConfig, file: string): BerthConfig {
  if (config.channels === undefined) return config;
  if (Object.keys(config.routes).length) {
    throw new BerthError('CONFIG_INVALID', `${file} sets both routes and channels, its old name`, {
      issues: [{ field: 'channels', reason: 'is the old name of routes: move its entries there' }],
    });
  }
  return { ...config, routes: config.channels };
}

/** Load berth.yaml; a missing file means all defaults. Nothing starts on an invalid one. */
export function loadBerthConfig(file: string, home: string): BerthConfig {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return BerthConfigSchema.parse({});
    throw err;
  }
  return parseBerthConfig(text, file, home);
}

/**
 * The current config: reloaded when berth.yaml changes on disk (an operator edit, or a grant
 * from another berth process). A reload that fails validation keeps the last good config and
 * reports the error once — a running server never continues half-configured.
 */
export function createConfigSource(file: string, home: string, onError: (err: unknown) => void): () => BerthConfig {
  const stamp = () => fileStamp(file) ?? 'missing';
  let seen = stamp();
  let current = loadBerthConfig(file, home);
  return () => {
    const now = stamp();
    if (now !== seen) {
      seen = now;
      try {
        current = loadBerthConfig(file, home);
      } catch (err) {
        onError(err);
      }
    }
    return current;
  };
}
