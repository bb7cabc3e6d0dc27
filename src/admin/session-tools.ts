import { basename } from 'node:path';
import type { Logger } from 'pino';
import type { SessionRecord } from '../config/session.js';
import type { FileTools } from '../file-tools/service.js';
import type { Project } from '../store/projects.js';
import { z } from 'zod';
import { runView } from './service-views.js';
import type { RunView } from './views.js';
import { BerthError } from '../base/errors.js';
import type { FilesSettings } from '../config/metadata.js';
import type { ScheduleService, ScheduleView } from './schedules.js';
import { SCHEDULE_TASK_MAX } from '../store/schedules.js';
import { toolAllowed, type SessionTool } from '../plan/levels.js';
import type { Runner } from '../runs/runner.js';
import { memorySearch, memoryWrite, MemorySearchSchema, MemoryWriteSchema, type MemoryEntry } from '../store/memory.js';
import type { SessionStore } from '../store/sessions.js';
import { checkShellCommand, sharedAreaOf, splitCommand } from '../plan/shell/index.js';
import { WORKSPACE_MOUNT } from '../plan/container-paths.js';
import { sandboxRead } from '../fs/sandbox.js';
import { queueOutboxFile } from '../store/run-files.js';
import { workspaceOf } from '../store/workspaces.js';

export const ShellRunSchema = z
  .object({
    argv: z.array(z.string().max(4096)).min(1).max(256).optional().describe('The command as argv (preferred).'),
    command: z.string().min(1).max(8192).optional().describe('Or a command line, split without a shell: ; | & > < ` $() are refused.'),
    task: z
      .enum(['test', 'lint', 'format'])
      .optional()
      .describe("Or run the workspace's own test/lint/format command (see workspace_profile)."),
  })
  .strict()
  .refine((v) => [v.argv, v.command, v.task].filter((x) => x !== undefined).length === 1, {
    message: 'give exactly one of argv, command or task',
  });

export const SendFileSchema = z
  .object({
    path: z
      .string()
      .min(1)
      .max(4096)
      .describe('The file, relative to your working directory (the workspace), e.g. "out/chart.png"; "/workspace/…" works too.'),
  })
  .strict();

export const SendFileResultSchema = z.object({
  queued: z.string().describe('Where it waits: "outbox/<name>"; it is sent to the person after this run\'s answer.'),
  size: z.number().int(),
  kind: z.string(),
});

export const ScheduleToolSchema = z
  .object({
    action: z.enum(['add', 'list', 'cancel']).default('add').describe("add a schedule, list this tenant's, or cancel one by id."),
    every: z
      .string()
      .min(1)
      .max(200)
      .optional()
      .describe('add, on a repeat: "2h", "weekday at 09:00", "mon,fri 18:30" (then optionally an IANA zone).'),
    at: z.string().min(1).max(200).optional().describe('add, once: "+30m", "14:00", "tomorrow 09:00", "2026-12-24 18:00".'),
    task: z.string().min(1).max(SCHEDULE_TASK_MAX).optional().describe('add: what you will be told to do then (in this conversation).'),
    id: z.string().min(1).max(20).optional().describe('cancel: the schedule id.'),
  })
  .strict();

/**
 * Tools berth runs for an agent, as the session a connection proves it is (never a parameter).
 * First gate: the tool policy for the session's level; then each tool's own checks (the shell
 * command profile, and the memory adapter's level check).
 */
export interface SessionTools {
  shellRun(ref: SessionRef, input: z.input<typeof ShellRunSchema>): Promise<RunView>;
  memorySearch(ref: SessionRef, input: z.input<typeof MemorySearchSchema>): { entries: MemoryEntry[] };
  memoryWrite(ref: SessionRef, input: z.input<typeof MemoryWriteSchema>): { entry: MemoryEntry };
  /** Queue a workspace file for the person: copied into outbox/, sent after the run (store/run-files.ts). */
  sendFile(ref: SessionRef, input: z.input<typeof SendFileSchema>): z.infer<typeof SendFileResultSchema>;
  /** The agent's own schedules, as its session's tenant (bounded like a person's: berth.yaml schedules). */
  schedule(ref: SessionRef, input: z.input<typeof ScheduleToolSchema>): { message: string; schedules: ScheduleView[] };
}

/** A session is named by its project and its id (ids mean nothing across projects). */
export interface SessionRef {
  project: string;
  session: string;
}

/**
 * send_file: a file of the person's own workspace queued in its outbox/ (read without following a
 * link, refused with a second hard link). A shared workspace is every tenant's: nothing there is
 * only this person's to be sent.
 */
function queueSendFile(workspace: { dir: string; isolated: boolean }, path: string, files: FilesSettings) {
  if (!workspace.isolated) {
    throw new BerthError('PERMISSION_DENIED', "send_file needs a workspace of the person's own; this project's workspaces are shared", {
      rule: 'workspace_isolation',
    });
  }
  // The agent sees its workspace at /workspace; any other path is relative to it.
  const rel = path.startsWith(`${WORKSPACE_MOUNT}/`) ? path.slice(WORKSPACE_MOUNT.length + 1) : path;
  return queueOutboxFile(workspace.dir, (rootFd, max) => sandboxRead(rootFd, rel, max, { oneLink: true }), rel, files);
}

export function createSessionTools(deps: {
  sessions: SessionStore;
  runner: () => Runner;
  fileTools: FileTools;
  /** The project's shared-area grants (berth.yaml), and the operator's refusal (logged). */
  grants: (project: string) => Array<{ name: string; mode: 'ro' | 'rw' }>;
  assertGranted: (project: string, area: string) => unknown;
  /** The opaque author id memory entries carry (never the tenant key). */
  memoryAuthor: (project: string, tenantKey: string) => string;
  logger: Logger;
  /** Schedules; without them the schedule tool says they are not offered. */
  schedules?: () => ScheduleService;
}): SessionTools {
  /** "the tests": the command the session workspace's profile detected. */
  function taskArgv(project: Project, session: SessionRecord, task: 'test' | 'lint' | 'format'): string[] {
    const argv = deps.fileTools.profileOf(project, session.settings.workspace.id ?? basename(session.settings.workspace.root_dir)).commands[
      task
    ];
    if (!argv)
      throw new BerthError('CONFIG_INVALID', `no ${task} command detected in this workspace (see workspace_profile)`, {
        issues: [{ field: 'task', reason: 'not detected' }],
      });
    return argv;
  }

  function gate(ref: SessionRef, tool: SessionTool) {
    const { project, session } = deps.sessions.get(ref.project, ref.session);
    const level = session.settings.permission_level;
    if (!toolAllowed(level, tool)) {
      deps.logger.warn({ project: project.metadata.name, session: ref.session, permission_level: level, tool }, 'tool refused by policy');
      throw new BerthError('PERMISSION_DENIED', `${tool} is not allowed at permission level ${level}`, { rule: 'tool_not_allowed' });
    }
    return { project, session, level };
  }

  return {
    async shellRun(ref, input) {
      const { project, session, level } = gate(ref, 'shell_run');
      const parsed = ShellRunSchema.parse(input);
      try {
        const argv = parsed.argv ?? (parsed.task ? taskArgv(project, session, parsed.task) : splitCommand(parsed.command as string));
        // A path into a shared area the project was not granted: refused and logged (AREA_NOT_GRANTED).
        const grants = deps.grants(project.metadata.name);
        for (const arg of argv.slice(1)) {
          const area = sharedAreaOf(arg);
          if (area !== undefined && !grants.some((g) => g.name === area)) deps.assertGranted(project.metadata.name, area);
        }
        checkShellCommand(
          level,
          argv,
          undefined,
          grants.map((g) => ({ name: g.name, writable: g.mode === 'rw' })),
        );
        return runView(await deps.runner().exec(ref, argv));
      } catch (err) {
        if (err instanceof BerthError && err.code === 'PERMISSION_DENIED') {
          deps.logger.warn(
            { project: project.metadata.name, session: ref.session, permission_level: level, rule: err.details.rule },
            'shell_run refused',
          );
        }
        throw err;
      }
    },
    memorySearch(ref, input) {
      const { project, level } = gate(ref, 'memory_search');
      return { entries: memorySearch(project.paths.memoryDir, level, input) };
    },
    sendFile(ref, input) {
      const { project, session } = gate(ref, 'send_file');
      const { path } = SendFileSchema.parse(input);
      const workspace = workspaceOf(project, session.settings.workspace.id ?? basename(session.settings.workspace.root_dir));
      const queued = queueSendFile(workspace, path, project.metadata.files);
      deps.logger.info(
        { project: project.metadata.name, session: ref.session, queued: queued.queued, size: queued.size },
        'send_file queued',
      );
      return queued;
    },
    schedule(ref, input) {
      const { project, session } = gate(ref, 'schedule');
      const service = deps.schedules?.();
      if (!service) throw new BerthError('CONFIG_INVALID', 'schedules are not offered here');
      const name = project.metadata.name;
      const tenant = session.tenant_key;
      const p = ScheduleToolSchema.parse(input);
      if (p.action === 'list') {
        const mine = service.list({ project: name, tenant });
        return { message: `${mine.length} schedule(s)`, schedules: mine };
      }
      if (p.action === 'cancel') {
        if (!p.id) throw new BerthError('CONFIG_INVALID', 'which schedule?', { issues: [{ field: 'id', reason: 'required to cancel' }] });
        const gone = service.cancel(p.id, { project: name, tenant });
        return { message: `cancelled ${gone.id}`, schedules: [gone] };
      }
      if ((p.every === undefined) === (p.at === undefined))
        throw new BerthError('CONFIG_INVALID', 'give exactly one of every or at', {
          issues: [{ field: 'every', reason: 'give exactly one of every or at' }],
        });
      if (!p.task)
        throw new BerthError('CONFIG_INVALID', 'what should be done then?', { issues: [{ field: 'task', reason: 'required to add' }] });
      // It runs in this conversation and answers in the chat this conversation's last message came from.
      const chat = service.chatOf(name, ref.session);
      const { schedule, confirmation } = service.add({
        project: name,
        tenant,
        session: ref.session,
        ...(chat ? { chat } : {}),
        kind: p.every !== undefined ? 'every' : 'at',
        words: (p.every ?? p.at ?? '').trim().split(/\s+/),
        task: p.task,
        actor: { kind: 'agent', who: `agent:${ref.session}` },
      });
      return { message: confirmation, schedules: [schedule] };
    },
    memoryWrite(ref, input) {
      const { project, session, level } = gate(ref, 'memory_write');
      return { entry: memoryWrite(project.paths.memoryDir, level, deps.memoryAuthor(project.metadata.name, session.tenant_key), input) };
    },
  };
}
