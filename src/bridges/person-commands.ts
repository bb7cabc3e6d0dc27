import type { ForgetAsked, PersonExport, PersonRequests } from '../admin/person-requests.js';
import type { TenantForget } from '../admin/tenant-data.js';
import { chatFileUrl } from './files.js';

/**
 * /export and /forget: a person's own data, asked for from the chat (admin/person-requests.ts
 * does it; this file says it). /export answers with a download link (the run files' link key);
 * /forget asks to be sure first (`/forget yes`), then forgets at once or asks the operator, as
 * berth.yaml says, and the chat hears the outcome in plain words.
 */
/** What a bridge is given to offer them (berth serve builds it). */
export interface PersonChat {
  requests: Pick<PersonRequests, 'export' | 'forget'>;
  /** berth.yaml bridges.public_url: where a link points. */
  publicUrl: () => string | undefined;
}

export interface PersonCommandContext {
  project: string;
  tenant: string;
  sessionId: string;
  /** `tell`: say something in this chat later (the operator's answer). */
  person?: PersonChat & { tell: (text: string) => void };
}

export const PERSON_HELP = [
  '/export — everything berth keeps of you here (conversations, files, runs), as one download',
  '/forget — remove everything berth keeps of you here (it asks you to be sure first)',
];

const mib = (bytes: number) => (bytes < 1024 * 1024 ? `${Math.max(1, Math.round(bytes / 1024))} KB` : `${(bytes / 1048576).toFixed(1)} MB`);

export function exportWords(e: PersonExport, publicUrl: string | undefined, project: string): string {
  return [
    `berth: your data is ready (${mib(e.bytes)}, a tar archive; manifest.json inside says what is in it):`,
    chatFileUrl(publicUrl, e.run, e.name, { project, key: e.key }),
    'Anyone with this link can download it for 7 days: keep it to yourself. /forget removes it with the rest.',
  ].join('\n');
}

const count = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

export function forgottenWords(f: TenantForget): string {
  const r = f.removed;
  return [
    `berth: done. Everything berth kept of you in ${f.project} is removed: ${count(r.sessions, 'conversation', 'conversations')}, ${count(r.workspaces, 'folder', 'folders')}, ${count(r.runs, 'run record', 'run records')}, ${count(r.memory, 'memory entry', 'memory entries')}, ${count(r.schedules, 'schedule', 'schedules')}.`,
    'berth keeps one line in its audit log saying someone was forgotten; it names you by a fingerprint only someone who knows your name could match. If you write here again, you start afresh.',
  ].join('\n');
}

type Command = (ctx: PersonCommandContext, args: string[]) => Promise<string>;

export const PERSON_COMMANDS: Record<string, Command> = {
  async export(ctx) {
    if (!ctx.person) return 'berth: /export is not offered in this chat; the operator can export your data (berth tenant export).';
    const made = await ctx.person.requests.export(ctx.project, ctx.tenant, ctx.sessionId);
    return exportWords(made, ctx.person.publicUrl(), ctx.project);
  },
  async forget(ctx, args) {
    if (!ctx.person) return 'berth: /forget is not offered in this chat; ask the operator (berth tenant forget).';
    if (args[0] !== 'yes')
      return [
        `berth: /forget removes everything berth keeps of you in ${ctx.project}: your conversations, your folder and its files, your runs, memory entries and schedules. It cannot be undone.`,
        '/export first if you want a copy. To go on, send: /forget yes',
      ].join('\n');
    const { tell } = ctx.person;
    const asked: ForgetAsked = await ctx.person.requests.forget(
      { project: ctx.project, tenant: ctx.tenant, session: ctx.sessionId },
      ({ answer, done, failed }) => {
        if (answer.decision === 'deny')
          return tell(
            answer.by === 'timeout'
              ? 'berth: the operator did not answer your /forget in time; nothing was removed. Ask again if you still want it.'
              : 'berth: the operator did not allow your /forget; nothing was removed. Ask them why.',
          );
        tell(
          done
            ? forgottenWords(done)
            : `berth: the operator allowed your /forget, but it did not finish: ${failed}. Please tell them, so they can finish it.`,
        );
      },
    );
    if ('done' in asked) return forgottenWords(asked.done);
    return 'berth: the operator has been asked to allow it; you will hear here when they answer. Nothing is removed until then.';
  },
};
