import type { ProgressFormat } from '../plan/agent-command.js';
import {
  DETAIL_MAX,
  Lines,
  NOTE_MAX,
  oneLine,
  Steps,
  type ProgressReader,
  type ProgressStep,
  type ProgressUpdate,
} from './progress-steps.js';
import { shellTraceReader } from './shell-trace.js';

export { DETAIL_MAX, LINE_MAX, NOTE_MAX, RESULT_MAX } from './progress-steps.js';
export type { ProgressReader, ProgressStep, ProgressSummary, ProgressUpdate, StepState } from './progress-steps.js';

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const obj = (v: unknown): Record<string, unknown> | undefined =>
  v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
const own = (o: Record<string, unknown> | undefined, key: string): unknown => (o && Object.hasOwn(o, key) ? o[key] : undefined);

/**
 * An agent at work, read from its machine-readable output as it streams: each tool call a step
 * that starts and ends, the agent's words between them, and its final answer. Pure: bytes in,
 * updates out. Four formats: Claude Code's `--output-format stream-json --verbose`, Codex's
 * `exec --json`, droid's `exec --output-format stream-json`, and the shell preset's trace (`sh -x`
 * with berth's PS4: each command a step).
 *
 * Everything here is the tenant's to forge (it controls the agent and its output): it shapes that
 * tenant's own view only, and every part is bounded (line length, step count, text lengths).
 */

/** `source`: the shell's message as written (shell-trace: its steps' labels keep redirections and pipelines). */
export function createProgressReader(format: ProgressFormat, source?: string): ProgressReader {
  if (format === 'shell-trace') return shellTraceReader(source);
  return jsonLinesReader(format === 'claude-stream-json' ? claudeEvent : format === 'droid-stream-json' ? droidEvent : codexEvent);
}

interface JsonState {
  steps: Steps;
  answer?: string;
  /** The last thing the agent said (Codex: its last message is the answer). */
  lastMessage?: string;
  /** Its turn ended (Claude Code's result, Codex's turn.completed or turn.failed, droid's completion). */
  done?: boolean;
}

type EventHandler = (event: Record<string, unknown>, state: JsonState, at: number) => ProgressUpdate[];

function jsonLinesReader(handle: EventHandler): ProgressReader {
  const state: JsonState = { steps: new Steps() };
  const lines = new Lines();
  const plain: string[] = [];
  let plainChars = 0;
  const keepPlain = (line: string) => {
    if (plainChars > 64 * 1024) return;
    plain.push(line);
    plainChars += line.length;
  };
  const read = (line: string, at: number): ProgressUpdate[] => {
    if (!line.trim()) return [];
    let event: unknown;
    try {
      event = JSON.parse(line);
    } catch {
      keepPlain(line);
      return [];
    }
    const o = obj(event);
    if (!o) {
      keepPlain(line);
      return [];
    }
    return handle(o, state, at);
  };
  return {
    push(stream, chunk, at) {
      return stream === 'stdout' ? lines.push(chunk).flatMap((line) => read(line, at)) : [];
    },
    answered: () => state.done === true,
    finish(exitCode, at) {
      const ended = read(lines.rest(), at);
      for (const s of state.steps.running()) ended.push(...state.steps.end(s.id, exitCode === 0 ? 'ended' : 'failed', undefined, at));
      // As the CLIs print their answer in text mode: one line break after it.
      const answer = state.answer ?? state.lastMessage;
      const stdout =
        answer !== undefined ? (answer === '' || answer.endsWith('\n') ? answer : `${answer}\n`) : plain.map((l) => `${l}\n`).join('');
      return { stdout, steps: state.steps.all(), moreSteps: state.steps.more, ended };
    },
  };
}

/** What a tool call works on, by its input (Claude Code's and droid's names for it). */
function toolDetail(tool: string, input: Record<string, unknown> | undefined): string {
  for (const key of [
    'command',
    'file_path',
    'notebook_path',
    'path',
    'directory_path',
    'folder',
    'pattern',
    'url',
    'query',
    'description',
    'prompt',
  ]) {
    const v = str(own(input, key));
    if (v) return v;
  }
  // droid's ApplyPatch: the files its patch names.
  const patch = str(own(input, 'input'));
  if (patch) return [...patch.matchAll(/^\*\*\* (?:Update|Add|Delete) File: (.+)$/gm)].map((m) => m[1]).join(', ') || tool;
  return input ? JSON.stringify(input).slice(0, DETAIL_MAX) : tool;
}

/** A tool_result's text: a string, or text blocks. */
function resultText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content.map((b) => str(own(obj(b), 'text')) ?? '').join('\n');
}

const claudeEvent: EventHandler = (event, state, at) => {
  const type = own(event, 'type');
  const content = own(obj(own(event, 'message')), 'content');
  const blocks = Array.isArray(content) ? content.map(obj) : [];
  const updates: ProgressUpdate[] = [];
  if (type === 'assistant') {
    for (const b of blocks) {
      const kind = own(b, 'type');
      if (kind === 'tool_use') {
        const id = str(own(b, 'id'));
        const tool = str(own(b, 'name')) ?? 'tool';
        if (id) updates.push(...state.steps.start(id, tool, toolDetail(tool, obj(own(b, 'input'))), at));
      } else if (kind === 'text') {
        const text = str(own(b, 'text'))?.trim();
        if (text) {
          state.lastMessage = text;
          updates.push({ type: 'note', text: text.slice(0, NOTE_MAX) });
        }
      }
    }
  } else if (type === 'user') {
    for (const b of blocks) {
      if (own(b, 'type') !== 'tool_result') continue;
      const id = str(own(b, 'tool_use_id'));
      if (id) updates.push(...state.steps.end(id, own(b, 'is_error') === true ? 'failed' : 'ok', resultText(own(b, 'content')), at));
    }
  } else if (type === 'result') {
    state.done = true;
    const result = str(own(event, 'result'));
    if (result !== undefined) state.answer = result;
  }
  return updates;
};

/** A Codex item as a step: its tool and what it works on (undefined: not a tool call). */
function codexStep(item: Record<string, unknown>): { tool: string; detail: string } | undefined {
  switch (own(item, 'type')) {
    case 'command_execution':
      return { tool: 'command', detail: str(own(item, 'command')) ?? '' };
    case 'file_change': {
      const changes = own(item, 'changes');
      const paths = Array.isArray(changes)
        ? changes.map((c) => `${str(own(obj(c), 'kind')) ?? 'change'} ${str(own(obj(c), 'path')) ?? ''}`.trim())
        : [];
      return { tool: 'edit', detail: paths.join(', ') };
    }
    case 'mcp_tool_call':
      return { tool: str(own(item, 'tool')) ?? 'mcp', detail: str(own(item, 'server')) ?? '' };
    case 'web_search':
      return { tool: 'web search', detail: str(own(item, 'query')) ?? '' };
    default:
      return undefined;
  }
}

const codexEvent: EventHandler = (event, state, at) => {
  const type = own(event, 'type');
  const item = obj(own(event, 'item'));
  if ((type === 'item.started' || type === 'item.updated' || type === 'item.completed') && item) {
    const id = str(own(item, 'id'));
    if (own(item, 'type') === 'agent_message' && type === 'item.completed') {
      const text = str(own(item, 'text'))?.trim();
      if (!text) return [];
      state.lastMessage = text;
      return [{ type: 'note', text: text.slice(0, NOTE_MAX) }];
    }
    const step = codexStep(item);
    if (!id || !step) return [];
    const updates = state.steps.start(id, step.tool, step.detail, at);
    if (type !== 'item.completed') return updates;
    const exit = own(item, 'exit_code');
    const status = own(item, 'status');
    const failed = status === 'failed' || status === 'declined' || (typeof exit === 'number' && exit !== 0);
    return [...updates, ...state.steps.end(id, failed ? 'failed' : 'ok', str(own(item, 'aggregated_output')), at)];
  }
  if (type === 'turn.completed' || type === 'turn.failed') state.done = true;
  if (type === 'turn.failed' || type === 'error') {
    const message = str(own(obj(own(event, 'error')), 'message')) ?? str(own(event, 'message'));
    if (message) state.answer ??= `error: ${message}`;
  }
  return [];
};

/**
 * Factory droid's `exec --output-format stream-json`: tool calls and results are events of their
 * own, linked by `id`; an Execute result ends with "[Process exited with code N]"; the answer is
 * the completion's `finalText` (older droids end without one: their last assistant message).
 */
const droidEvent: EventHandler = (event, state, at) => {
  const type = own(event, 'type');
  const id = str(own(event, 'id'));
  if (type === 'tool_call' && id) {
    const tool = str(own(event, 'toolName')) ?? str(own(event, 'toolId')) ?? 'tool';
    return state.steps.start(id, tool, toolDetail(tool, obj(own(event, 'parameters'))), at);
  }
  if (type === 'tool_result' && id) {
    const value = str(own(event, 'value'));
    const error = str(own(obj(own(event, 'error')), 'message'));
    const exit = value === undefined ? undefined : /\[Process exited with code (-?\d+)\]\s*$/.exec(value);
    const failed = own(event, 'isError') === true || (exit !== undefined && exit !== null && exit[1] !== '0');
    return state.steps.end(id, failed ? 'failed' : 'ok', value ?? error, at);
  }
  if (type === 'message' && own(event, 'role') === 'assistant') {
    const text = str(own(event, 'text'))?.trim();
    if (!text) return [];
    state.lastMessage = text;
    return [{ type: 'note', text: text.slice(0, NOTE_MAX) }];
  }
  if (type === 'completion') {
    state.done = true;
    const text = str(own(event, 'finalText'));
    if (text !== undefined) state.answer = text;
  } else if (type === 'error') {
    const message = str(own(event, 'message'));
    if (message) state.answer ??= `error: ${message}`;
  }
  return [];
};

/** A one-line account of the work so far, for a chat that cannot show steps live ("ran 3 commands, edited 1 file; now: npm test"). */
export function progressSentence(steps: readonly ProgressStep[], more = 0): string {
  const kinds = new Map<string, number>();
  const kindOf = (s: ProgressStep) => {
    const t = s.tool.toLowerCase();
    if (t === 'bash' || t === 'command' || t === 'sh' || t === 'execute') return 'command';
    if (t === 'edit' || t === 'write' || t === 'multiedit' || t === 'notebookedit' || t === 'create' || t === 'applypatch') return 'edit';
    if (t === 'read' || t === 'grep' || t === 'glob' || t === 'ls') return 'read';
    return 'other';
  };
  for (const s of steps) kinds.set(kindOf(s), (kinds.get(kindOf(s)) ?? 0) + 1);
  const words: Record<string, [string, string]> = {
    command: ['ran 1 command', 'ran %d commands'],
    edit: ['made 1 edit', 'made %d edits'],
    read: ['read 1 file', 'read %d files'],
    other: ['used 1 other tool', 'used %d other tools'],
  };
  const parts = ['command', 'edit', 'read', 'other']
    .filter((k) => kinds.has(k))
    .map((k) => {
      const count = kinds.get(k) ?? 0;
      const [one, many] = words[k] as [string, string];
      return count === 1 ? one : many.replace('%d', String(count));
    });
  if (more > 0) parts.push(`${more} more steps`);
  const now = [...steps].reverse().find((s) => s.state === 'running');
  const head = parts.length ? parts.join(', ') : 'working';
  return now ? `${head}; now: ${oneLine(now.detail || now.tool, 80)}` : head;
}
