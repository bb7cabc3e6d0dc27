import { z } from 'zod';

export const PERMISSION_LEVELS = ['low', 'medium', 'high'] as const;
export const PermissionLevelSchema = z.enum(PERMISSION_LEVELS).describe('How much the agent of this session may do.');
export type PermissionLevel = z.infer<typeof PermissionLevelSchema>;
export const DEFAULT_PERMISSION_LEVEL: PermissionLevel = 'medium';
/** Hosts one conversation may have allowed (the oldest goes first past it). */
export const APPROVED_HOSTS_MAX = 32;

export const SessionIdSchema = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/,
    'must be 1-128 characters of A-Z, a-z, 0-9, "_", "." and "-", starting with a letter or digit',
  )
  .describe('A session id (a conversation). Never used as a path on its own.');

export const WorkspaceModeSchema = z
  .enum(['tenant', 'session'])
  .describe('"tenant": the tenant workspace, shared by its sessions; "session": a directory of this session only.');

/** Stored settings: berth decides root_dir, the caller only the mode. */
export const SessionSettingsSchema = z
  .object({
    permission_level: PermissionLevelSchema,
    workspace: z
      .object({
        mode: WorkspaceModeSchema,
        id: z.string().optional().describe("The workspace's id (its directory name), kept so nothing recovers it from a path."),
        root_dir: z.string(),
      })
      .strict(),
  })
  .strict();
export type SessionSettings = z.infer<typeof SessionSettingsSchema>;

/** PUT /api/projects/:name/sessions/:id/settings body. */
export const SessionSettingsUpdateSchema = z
  .object({
    settings: z
      .object({
        permission_level: PermissionLevelSchema.optional(),
        workspace: z
          .object({
            mode: WorkspaceModeSchema.optional(),
            root_dir: z.string().optional().describe('Decided by berth; if sent, it must equal the current value.'),
          })
          .strict()
          .optional()
          .describe('The workspace mode (root_dir is decided by berth).'),
      })
      .strict()
      .describe('What to change: permission_level and/or workspace.mode; applies from the next run.'),
  })
  .strict();
export type SessionSettingsUpdate = z.infer<typeof SessionSettingsUpdateSchema>;

/** A conversation's name, as a person reads it in a list: one line of text. */
export const SessionTitleSchema = z
  .string()
  .trim()
  .min(1, 'must not be empty')
  .max(80, 'must be at most 80 characters')
  .regex(/^[^\u0000-\u001f\u007f]*$/, 'must be one line of text')
  .describe("The conversation's name (berth titles it from its first message; its person may rename it).");

/** PUT /chat/api/sessions/:id (and the store's rename): the new name. */
export const SessionTitleUpdateSchema = z.object({ title: SessionTitleSchema }).strict();

const TITLE_FROM_CHARS = 60;

/** A title from a conversation's first message: its first line with text, whitespace collapsed, cut short. */
export function titleFrom(message: string): string | undefined {
  const line = message
    .split('\n')
    .map((l) =>
      l
        .replace(/[\u0000-\u001f\u007f]/g, ' ')
        .replace(/\s+/g, ' ')
        .trim(),
    )
    .find(Boolean);
  if (!line) return undefined;
  return line.length > TITLE_FROM_CHARS ? `${line.slice(0, TITLE_FROM_CHARS - 1).trimEnd()}…` : line;
}

export const SessionRecordSchema = z
  .object({
    id: SessionIdSchema,
    title: SessionTitleSchema.optional(),
    project: z.string(),
    tenant_key: z.string(),
    created_at: z.string(),
    updated_at: z.string(),
    runs: z.number().int().min(0).describe('How many runs the session has had (0: the next is its first).'),
    settings: SessionSettingsSchema,
    approved_hosts: z
      .array(z.string().max(260))
      .max(APPROVED_HOSTS_MAX)
      .optional()
      .describe(
        'Hosts ("name:port") its person allowed for this conversation when its agent asked (the egress approvals): reached as if on the allowlist; and secrets ("NAME for name:port") whose grant asks before its first use.',
      ),
  })
  .strict();
export type SessionRecord = z.infer<typeof SessionRecordSchema>;
