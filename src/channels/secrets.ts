import fs from 'node:fs';
import { createHash, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { BerthError } from '../base/errors.js';

/**
 * A channel's credential: in berth.yaml itself (`token`) or in a file it names (`token_file`,
 * read when the bridge starts; the file is the operator's, never a container's). Exactly one.
 * Never logged, never printed back (`berth config get` shows "(set)").
 */
export const secretFields = <const K extends string>(key: K, what: string) =>
  ({
    [key]: z.string().min(1).max(4096).optional().describe(`${what}. Or ${key}_file.`),
    [`${key}_file`]: z
      .string()
      .min(1)
      .max(4096)
      .optional()
      .describe(`A file holding ${key} (its first line), instead of ${key} in berth.yaml.`),
  }) as { [P in K]: z.ZodOptional<z.ZodString> } & { [P in `${K}_file`]: z.ZodOptional<z.ZodString> };

/** For a schema's superRefine: exactly one of key and key_file. */
export function oneSecret(c: Record<string, unknown>, key: string, ctx: z.RefinementCtx): void {
  const given = [c[key], c[`${key}_file`]].filter((v) => v !== undefined).length;
  if (given !== 1)
    ctx.addIssue({
      code: 'custom',
      path: [key],
      message: given === 0 ? `set ${key} or ${key}_file` : `set ${key} or ${key}_file, not both`,
    });
}

export function readSecret(c: Record<string, unknown>, key: string): string {
  const value = c[key];
  if (typeof value === 'string') return value;
  const file = c[`${key}_file`];
  if (typeof file !== 'string')
    throw new BerthError('CONFIG_INVALID', `no ${key} is set`, { issues: [{ field: key, reason: `set ${key} or ${key}_file` }] });
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new BerthError('CONFIG_INVALID', `${key}_file ${file} cannot be read`, {
      issues: [{ field: `${key}_file`, reason: (err as NodeJS.ErrnoException).code ?? 'unreadable' }],
    });
  }
  const line = text.split('\n')[0]?.trim() ?? '';
  if (!line)
    throw new BerthError('CONFIG_INVALID', `${key}_file ${file} is empty`, { issues: [{ field: `${key}_file`, reason: 'empty' }] });
  return line;
}

/** Which credential, said without it: a file's name, or a short hash of the value. */
export function secretIdentity(c: Record<string, unknown>, key: string): string {
  const file = c[`${key}_file`];
  if (typeof file === 'string') return `${key}_file ${file}`;
  return `${key} #${createHash('sha256')
    .update(String(c[key] ?? ''))
    .digest('hex')
    .slice(0, 8)}`;
}

/** Two secrets (or signatures) compared in constant time. */
export function sameSecret(given: string | Buffer, expected: string | Buffer): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}
