import fs from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { BerthError, errnoOf } from '../errors.js';
import { checkOperatorConfig } from './operator-checks.js';
import { parseOrThrow } from './parse.js';

export const DEFAULT_SHELL_IMAGE = 'berth/shell:latest';
export const DEFAULT_AGENT_IMAGE = 'berth/agent:latest';

export const AREA_NAME_PATTERN = /^[a-z0-9][a-z0-9_-]{0,62}$/;
const AreaNameSchema = z.string().regex(AREA_NAME_PATTERN, 'must be 1-63 characters of a-z, 0-9, "_" and "-"');

export const GrantSchema = z.union([
  AreaNameSchema,
  z.object({ name: AreaNameSchema, mode: z.enum(['ro', 'rw']).default('ro') }).strict(),
]);
export type Grant = z.infer<typeof GrantSchema>;

export const ProjectGrantsSchema = z
  .object({
    private_workspace: z.string().optional().describe('Absolute path of the project directory; default <workspaces_path>/<name>.'),
    shared_access: z.array(GrantSchema).default([]).describe('Shared areas this project may use (deny by default); a bare name is read-only.'),
  })
  .strict();

/** berth.yaml: the operator's settings. Nothing a project admin or tenant sends changes it. */
export const BerthConfigSchema = z
  .object({
    workspaces_path: z.string().min(1).default('projects').describe('Where private workspaces (project directories) live; relative to the berth home.'),
    shared_workspaces: z
      .record(AreaNameSchema, z.string())
      .default({})
      .describe('Named shared areas: logical name → absolute, canonical, existing host directory.'),
    projects: z.record(z.string(), ProjectGrantsSchema).default({}).describe('Per-project operator settings: private workspace override, shared-area grants.'),
    channels: z
      .record(z.string().min(1).max(256), z.object({ project: z.string(), workflow: z.string() }).strict())
      .default({})
      .describe('Channel profiles: a bridge channel → the project and default workflow that answer it.'),
    env: z
      .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string())
      .default({})
      .describe('Values for the environment variable names a project lets through (metadata.json "env").'),
    images: z
      .object({
        shell: z.string().min(1).default(DEFAULT_SHELL_IMAGE).describe('Image for the shell preset.'),
        agent: z.string().min(1).default(DEFAULT_AGENT_IMAGE).describe('Image for the droid/claude/codex presets.'),
      })
      .strict()
      .prefault({}),
    admin_token: z
      .string()
      .min(16, 'must be at least 16 characters')
      .optional()
      .describe('Bearer token for the HTTP admin API and /mcp; else BERTH_ADMIN_TOKEN, else one is generated.'),
    agent_user: z
      .object({
        uid: z.number().int().min(1).max(2 ** 31).default(10001),
        gid: z.number().int().min(1).max(2 ** 31).default(10001),
      })
      .strict()
      .prefault({})
      .describe('The non-root user agents run as; tenant workspaces are owned by it.'),
  })
  .strict();

export type BerthConfig = z.output<typeof BerthConfigSchema>;

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
  const config = parseOrThrow(BerthConfigSchema, data, file);
  const issues = checkOperatorConfig(config, home);
  if (issues.length) throw new BerthError('CONFIG_INVALID', `${file} is invalid`, { issues });
  return config;
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
  const stamp = () => {
    try {
      const s = fs.statSync(file);
      return `${s.mtimeMs}:${s.size}:${s.ino}`;
    } catch {
      return 'missing';
    }
  };
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
