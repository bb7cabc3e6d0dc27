import { z } from 'zod';
import { RunViewSchema } from '../admin/views.js';
import { MemoryEntrySchema, MemorySearchSchema, MemoryWriteSchema } from '../store/memory.js';
import {
  ScheduleToolSchema,
  SendFileResultSchema,
  SendFileSchema,
  ShellRunSchema,
  type SessionRef,
  type SessionTools,
} from '../admin/session-tools.js';
import { ScheduleViewSchema } from '../admin/schedules.js';
import { FILE_TOOLS } from './file-tools.js';
import type { FileToolsCaller } from '../file-tools/service.js';
import { READ_ONLY, tool, type ToolSpec } from './tool-spec.js';

/** What an agent's session may call at /mcp/session. The session comes from the token, never from input. */
export interface SessionContext {
  tools: SessionTools;
  session: SessionRef;
  /** The session tenant's file tools (the same gateway a container reaches through its socket). */
  files: FileToolsCaller;
}

export const SESSION_TOOLS: ToolSpec<SessionContext>[] = [
  tool({
    name: 'shell_run',
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false },
    description:
      "Run a command in this session's sandbox (its workspace at /workspace), under the session's permission level: low = file management in the workspace, medium = + information commands, high = any binary, writes only inside the workspace. No shell: ; | & > < ` $() are refused.",
    input: ShellRunSchema,
    output: z.object({ run: RunViewSchema }),
    run: async (ctx: SessionContext, input) => ({ run: await ctx.tools.shellRun(ctx.session, input) }),
  }),
  tool({
    name: 'memory_search',
    annotations: READ_ONLY,
    description: "Search the project's long-term memory (medium and high levels).",
    input: MemorySearchSchema,
    output: z.object({ entries: z.array(MemoryEntrySchema) }),
    run: (ctx: SessionContext, input) => ctx.tools.memorySearch(ctx.session, input),
  }),
  tool({
    name: 'memory_write',
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false },
    description: "Add an entry to the project's long-term memory (high level only).",
    input: MemoryWriteSchema,
    output: z.object({ entry: MemoryEntrySchema }),
    run: (ctx: SessionContext, input) => ctx.tools.memoryWrite(ctx.session, input),
  }),
  tool({
    name: 'send_file',
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false },
    description:
      'Send a file from your workspace to the person you are talking with: it is copied into outbox/ and delivered after your answer (an image shown inline where the chat can, a link where the file is too big for the chat). Writing a file into outbox/ yourself does the same.',
    input: SendFileSchema,
    output: SendFileResultSchema,
    run: (ctx: SessionContext, input) => ctx.tools.sendFile(ctx.session, input),
  }),
  tool({
    name: 'schedule',
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false },
    description:
      'Run a task later in this conversation, once (at: "+30m", "tomorrow 09:00") or on a repeat (every: "weekday at 09:00", "2h"); your answer then is posted to the chat this conversation is in. Also list or cancel your schedules. Bounded by the operator (how many, how often, who may).',
    input: ScheduleToolSchema,
    output: z.object({ message: z.string(), schedules: z.array(ScheduleViewSchema) }),
    run: (ctx: SessionContext, input) => ctx.tools.schedule(ctx.session, input),
  }),
  // Agent loops outside containers get the file tools too, as the session's tenant.
  ...FILE_TOOLS.map((t): ToolSpec<SessionContext> => ({ ...t, run: (ctx, input) => t.run(ctx.files, input) })),
];
