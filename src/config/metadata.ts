import { posix } from 'node:path';
import { z } from 'zod';
import { FILE_BOUNDS } from './bounds.js';
import { ProjectEgressSchema, ProjectModelsSchema } from './outbound.js';
import { DEFAULT_RUNTIME, LevelRuntimesSchema, RuntimeNameSchema } from './runtimes.js';

export const PROJECT_NAME_PATTERN = /^[a-z0-9][a-z0-9-]{0,62}$/;
export const AGENT_PRESETS = ['shell', 'droid', 'claude', 'codex'] as const;
export const MESSAGE_PLACEHOLDER = '{message}';
/** Who may allow what a run asks for beyond its grant (ChatSettingsSchema approvals). */
export const APPROVERS = ['person', 'operator', 'off'] as const;
export type Approver = (typeof APPROVERS)[number];

// eslint-disable-next-line no-control-regex
const CONTROL_CHARS = /[\u0000-\u001f\u007f]/;

export const ProjectNameSchema = z
  .string()
  .regex(PROJECT_NAME_PATTERN, 'must be 1-63 characters of a-z, 0-9 and "-", starting with a letter or digit')
  .describe('Project name; also its directory name under projects/.');

/** Why a protected path entry is refused, or undefined when it is fine. */
export function protectedPathProblem(entry: string): string | undefined {
  if (entry.length === 0) return 'is empty';
  if (entry.length > 1024) return 'is longer than 1024 characters';
  if (CONTROL_CHARS.test(entry)) return 'contains a control character';
  if (entry.startsWith('/')) return 'must be relative to /workspace, not absolute';
  const body = entry.endsWith('/') ? entry.slice(0, -1) : entry;
  const segments = body.split('/');
  if (segments.includes('..')) return 'must not contain ".."';
  if (segments.some((s) => Buffer.byteLength(s) > 255)) return 'has a component longer than 255 bytes';
  if (body === '' || body === '.') return 'must name a path below /workspace, not /workspace itself';
  const normal = posix.normalize(body);
  if (normal !== body || segments.includes('.') || segments.includes('')) {
    return `is not normalized (write "${normal}${entry.endsWith('/') ? '/' : ''}")`;
  }
  return undefined;
}

/** "a/b/" and "a/b" name the same path; the trailing "/" only says it is a directory. */
export function protectedPathKey(entry: string): string {
  return entry.endsWith('/') ? entry.slice(0, -1) : entry;
}

export const ProtectedPathsSchema = z
  .array(z.string())
  .max(64, 'at most 64 protected paths')
  .superRefine((entries, ctx) => {
    const seen = new Map<string, string>();
    entries.forEach((entry, index) => {
      const problem = protectedPathProblem(entry);
      if (problem) {
        ctx.addIssue({ code: 'custom', path: [index], message: `"${entry}" ${problem}` });
        return;
      }
      const key = protectedPathKey(entry);
      if (seen.has(key)) {
        ctx.addIssue({ code: 'custom', path: [index], message: `"${entry}" duplicates "${seen.get(key)}"` });
        return;
      }
      seen.set(key, entry);
    });
    // A path inside a protected directory is already read-only; refusing it keeps one mount per path.
    for (const [key, entry] of seen) {
      for (const [otherKey, other] of seen) {
        if (key !== otherKey && key.startsWith(`${otherKey}/`)) {
          ctx.addIssue({
            code: 'custom',
            path: [entries.indexOf(entry)],
            message: `"${entry}" is inside "${other}", which is already protected`,
          });
        }
      }
    }
  })
  .describe('Paths relative to the /workspace root that containers get read-only; a trailing "/" means a directory.');

export const AgentSchema = z
  .union([
    z.enum(AGENT_PRESETS),
    z
      .array(z.string().min(1).max(4096))
      .min(1)
      .max(64)
      .refine((argv) => argv.some((arg) => arg.includes(MESSAGE_PLACEHOLDER)), {
        message: `a custom argv must contain the ${MESSAGE_PLACEHOLDER} placeholder`,
      }),
  ])
  .describe(`A preset (${AGENT_PRESETS.join(', ')}) or a custom argv containing "${MESSAGE_PLACEHOLDER}".`);

const LIMIT_FIELDS = {
  memory_mb: z.number().int().min(16).max(65536).describe('Memory limit (MiB); swap is not added.'),
  cpus: z.number().min(0.05).max(64).describe('CPU limit, in cores.'),
  pids: z.number().int().min(8).max(32768).describe('Process limit inside the container.'),
  timeout_seconds: z.number().int().min(1).max(86400).describe('The container is killed after this.'),
  output_bytes: z
    .number()
    .int()
    .min(1024)
    .max(64 * 1024 * 1024)
    .describe('Output kept per run; a run that prints more is stopped and its output truncated.'),
  disk_mb: z
    .number()
    .int()
    .min(1)
    .max(1024 * 1024)
    .describe(
      'What a run may leave in its writable workspace (MiB): no single file grows past it (the kernel refuses the write), and a run whose workspace passes it is stopped within about a second (with berth.yaml disk_quotas: loop, the workspace is a filesystem of this size: ENOSPC).',
    ),
  files: z
    .number()
    .int()
    .min(100)
    .max(10_000_000)
    .describe('Files and directories a writable workspace may hold; a run that passes it is stopped within about a second.'),
};

export const LIMIT_DEFAULTS = {
  memory_mb: 512,
  cpus: 1,
  pids: 256,
  timeout_seconds: 300,
  output_bytes: 1024 * 1024,
  disk_mb: 1024,
  files: 100_000,
};

export const LimitsSchema = z
  .object({
    memory_mb: LIMIT_FIELDS.memory_mb.default(LIMIT_DEFAULTS.memory_mb),
    cpus: LIMIT_FIELDS.cpus.default(LIMIT_DEFAULTS.cpus),
    pids: LIMIT_FIELDS.pids.default(LIMIT_DEFAULTS.pids),
    timeout_seconds: LIMIT_FIELDS.timeout_seconds.default(LIMIT_DEFAULTS.timeout_seconds),
    output_bytes: LIMIT_FIELDS.output_bytes.default(LIMIT_DEFAULTS.output_bytes),
    disk_mb: LIMIT_FIELDS.disk_mb.default(LIMIT_DEFAULTS.disk_mb),
    files: LIMIT_FIELDS.files.default(LIMIT_DEFAULTS.files),
  })
  .strict();

/** For updates: only the limits given change (no defaults filled in). */
export const LimitsPatchSchema = z.object(LIMIT_FIELDS).partial().strict();

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

export const EnvNamesSchema = z
  .array(
    z
      .string()
      .regex(ENV_NAME, 'must be a valid environment variable name')
      .refine((name) => !name.startsWith('BERTH_'), 'names starting with BERTH_ are set by berth'),
  )
  .max(64)
  .refine((names) => new Set(names).size === names.length, 'must not repeat a name')
  .describe("Variable names passed to the agent; values come from berth.yaml's env, never the host environment.");

const TenantKeyRefSchema = z.string().min(1).max(1024);

export const TeamsSchema = z
  .record(TenantKeyRefSchema, z.object({ members: z.array(TenantKeyRefSchema).max(1024) }).strict())
  .describe('Group tenants (e.g. a group chat) and the tenant keys of their members.');

export const ChatSettingsSchema = z
  .object({
    raise_level: z
      .enum(['admins', 'anyone'])
      .default('admins')
      .describe("Who may raise a chat session's level with /level (lowering is always allowed): the project's admins, or anyone."),
    format: z
      .enum(['markdown', 'text'])
      .optional()
      .describe(
        'How the web chat shows answers: markdown (rendered, sanitized) or text (as printed). Default: markdown for the claude, codex and droid presets, text otherwise.',
      ),
    approvals: z
      .enum(APPROVERS)
      .default('person')
      .describe(
        'Who is asked when an agent at medium or high wants a host outside the egress allowlist, or a chat message would go past its tenant\'s daily model budget: "person" (the person in the chat: a card in the web chat, /yes or /no on Signal), "operator" (only the operator: berth approvals), or "off" (refused at once, nobody asked).',
      ),
    show_cost: z
      .boolean()
      .optional()
      .describe(
        "Each answer of a claude or codex agent ends with what it cost (tokens, money where berth.yaml prices its model) and what is left of the person's day. Default: on when the project has a daily budget or its models have prices.",
      ),
    approval_timeout_seconds: z
      .number()
      .int()
      .min(10)
      .max(3600)
      .default(120)
      .describe('How long a held request waits for an answer; none by then: denied.'),
  })
  .strict()
  .describe("How chat bridges treat this project's users.");

/** A media type pattern as the files setting takes it: "image/png", "image/*", or any type. */
const MEDIA_PATTERN = /^(\*\/\*|[a-z0-9][a-z0-9!#$&^_.+-]{0,63}\/(\*|[a-z0-9][a-z0-9!#$&^_.+-]{0,127}))$/;

export const FilesSettingsSchema = z
  .object({
    max_file_mb: z
      .number()
      .int()
      .min(1)
      .max(FILE_BOUNDS.maxFileMb)
      .default(20)
      .describe(
        'Largest file a person may send in, and the agent send out (MiB); a larger one is refused with a word to the person (out: sent as a link).',
      ),
    max_message_mb: z
      .number()
      .int()
      .min(1)
      .max(FILE_BOUNDS.maxMessageMb)
      .default(50)
      .describe('All files of one message together (MiB); the ones past it are refused with a word to the person.'),
    max_files: z
      .number()
      .int()
      .min(1)
      .max(FILE_BOUNDS.maxFiles)
      .default(10)
      .describe(
        'Files one message may carry in, and one run send out; the ones past it are refused (out: left in outbox/ for the next run).',
      ),
    types: z
      .array(z.string().regex(MEDIA_PATTERN, 'must be a media type like "image/png", "image/*" or "*/*"'))
      .min(1)
      .max(64)
      .default(['*/*'])
      .describe(
        'Media types people may send in ("image/*", "application/pdf"); any other is refused with a word to the person. Judged by the file name\'s extension where berth knows it, else by the type the channel declares. Default: any.',
      ),
  })
  .strict()
  .describe(
    "Files in and out (docs/files.md): what lands in a workspace's inbox/ and what leaves its outbox/. Every file also counts against limits.disk_mb.",
  );

export const ProjectMetadataSchema = z
  .object({
    name: ProjectNameSchema,
    workspace_isolation: z
      .boolean()
      .default(false)
      .describe('true: a container sees only its tenant workspace; false: the whole project directory.'),
    protected_paths: ProtectedPathsSchema.default([]),
    image: z.string().min(1).max(512).optional().describe('Container image; defaults by agent preset.'),
    agent: AgentSchema.default('shell'),
    runtime: RuntimeNameSchema.default(DEFAULT_RUNTIME),
    level_runtimes: LevelRuntimesSchema,
    limits: LimitsSchema.prefault({}).describe(
      'Per-container limits: memory_mb, cpus, pids, timeout_seconds, output_bytes, disk_mb, files.',
    ),
    env: EnvNamesSchema.default([]),
    models: ProjectModelsSchema.prefault({}).describe(
      "Model upstreams (berth.yaml's models) and model names this project's agents may call, and each tenant's hourly budget.",
    ),
    egress: ProjectEgressSchema.prefault({}).describe("Hosts agents at medium and high may reach through berth's egress proxy."),
    teams: TeamsSchema.default({}),
    chat: ChatSettingsSchema.prefault({}),
    files: FilesSettingsSchema.prefault({}),
    admins: z
      .array(TenantKeyRefSchema)
      .max(256)
      .default([])
      .describe("Tenant keys of the project's leadership (read members' shared folders)."),
  })
  .strict();

export type ProjectMetadata = z.output<typeof ProjectMetadataSchema>;
export type ProjectMetadataInput = z.input<typeof ProjectMetadataSchema>;
export type Limits = z.output<typeof LimitsSchema>;
export type Agent = z.output<typeof AgentSchema>;

/** The settings an admin may change after creation (everything but the name). */
export const ProjectUpdateSchema = z
  .object({
    workspace_isolation: z
      .boolean()
      .optional()
      .describe('true: a container sees only its tenant workspace; false: the whole project directory.'),
    protected_paths: ProtectedPathsSchema.optional(),
    image: z.string().min(1).max(512).optional().describe('Container image; defaults by agent preset.'),
    agent: AgentSchema.optional(),
    runtime: RuntimeNameSchema.optional(),
    level_runtimes: LevelRuntimesSchema.removeDefault().optional().describe('Replaces the per-level runtimes.'),
    limits: LimitsPatchSchema.optional().describe('Limits to change (the others keep their values).'),
    env: EnvNamesSchema.optional(),
    models: ProjectModelsSchema.optional().describe('Replaces the model settings.'),
    egress: ProjectEgressSchema.optional().describe('Replaces the egress allowlist.'),
    teams: TeamsSchema.optional(),
    chat: ChatSettingsSchema.optional(),
    files: FilesSettingsSchema.optional().describe('Replaces the files settings.'),
    admins: z.array(TenantKeyRefSchema).max(256).optional().describe("Tenant keys of the project's leadership (replaces the list)."),
  })
  .strict();

export type ProjectUpdate = z.output<typeof ProjectUpdateSchema>;

/** How a project's answers read in the web chat (ChatSettingsSchema format, or its preset's way). */
export function chatFormatOf(metadata: Pick<ProjectMetadata, 'chat' | 'agent'>): 'markdown' | 'text' {
  return (
    metadata.chat.format ?? (metadata.agent === 'claude' || metadata.agent === 'codex' || metadata.agent === 'droid' ? 'markdown' : 'text')
  );
}
export type FilesSettings = z.output<typeof FilesSettingsSchema>;
