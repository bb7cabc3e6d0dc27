import fs from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { BerthError, errnoOf } from '../errors.js';
import { parseOrThrow } from './parse.js';

export const DEFAULT_SHELL_IMAGE = 'berth/shell:latest';
export const DEFAULT_AGENT_IMAGE = 'berth/agent:latest';

/** berth.yaml: the operator's settings. Nothing a project admin or tenant sends changes it. */
export const BerthConfigSchema = z
  .object({
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

export function parseBerthConfig(text: string, file = 'berth.yaml'): BerthConfig {
  let data: unknown;
  try {
    data = parseYaml(text) ?? {};
  } catch (err) {
    throw new BerthError('CONFIG_INVALID', `${file} is not valid YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  return parseOrThrow(BerthConfigSchema, data, file);
}

/** Load berth.yaml; a missing file means all defaults. */
export function loadBerthConfig(file: string): BerthConfig {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return BerthConfigSchema.parse({});
    throw err;
  }
  return parseBerthConfig(text, file);
}
