import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { parsesAs, readJsonFile } from '../fs/json-file.js';
import { atomicWriteFile } from '../fs/tree.js';

/**
 * What a bridge remembers besides its inbox: each chat's conversation generation (/new starts
 * the next) and its senders — approved, or waiting for the operator. berth-owned, written
 * atomically; keys are the transport's strings, looked up as own entries only.
 */
const MAX_PENDING = 1000;

const StateSchema = z.object({
  generations: z.array(z.tuple([z.string(), z.number().int().min(0)])).default([]),
  approved: z.array(z.string()).default([]),
  pending: z
    .array(
      z.object({
        sender: z.string(),
        name: z.string().optional(),
        first_seen: z.string(),
        refused_at: z.string().optional().describe('When the sender was last told they are not approved (one refusal per period).'),
      }),
    )
    .default([]),
  denied: z.array(z.string()).default([]).describe('Senders the operator turned away: never asked about again, never answered.'),
});
type State = z.infer<typeof StateSchema>;

export interface BridgeState {
  generation(chat: string): number;
  /** Start the chat's next conversation; returns its generation. */
  nextGeneration(chat: string): number;
  isApproved(sender: string): boolean;
  /**
   * An unapproved sender wrote: record them as waiting. `first`: they were not waiting before (tell
   * the operator); `reply`: tell them they are not approved (at most once per `everyMs`). Past
   * MAX_PENDING waiting senders a new one is neither recorded nor answered.
   */
  noteStranger(sender: string, name: string | undefined, now: Date, everyMs: number): { first: boolean; reply: boolean };
  pending(): State['pending'];
  /** `was_pending`: they had written and wait to hear (berth bridge approve tells them). */
  approve(sender: string): { approved: boolean; was_pending: boolean; already: boolean };
  /** The operator turns a waiting sender away: no longer pending, never asked about again (approve lets them in later). */
  deny(sender: string): { was_pending: boolean };
  isDenied(sender: string): boolean;
}

export function openBridgeState(dir: string, bridge: string): BridgeState {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, `${bridge}-state.json`);
  const load = (): State => readJsonFile(file, StateSchema) ?? StateSchema.parse({});
  const save = (state: State) => atomicWriteFile(file, `${JSON.stringify(state, null, 2)}\n`, 0o600, parsesAs(StateSchema));
  const generations = () => new Map(load().generations);
  return {
    generation: (chat) => generations().get(chat) ?? 0,
    nextGeneration(chat) {
      const state = load();
      const map = new Map(state.generations);
      const next = (map.get(chat) ?? 0) + 1;
      map.set(chat, next);
      save({ ...state, generations: [...map] });
      return next;
    },
    isApproved: (sender) => load().approved.includes(sender),
    noteStranger(sender, name, now, everyMs) {
      const state = load();
      const at = now.toISOString();
      const waiting = state.pending.find((p) => p.sender === sender);
      if (!waiting) {
        if (state.approved.includes(sender) || state.denied.includes(sender) || state.pending.length >= MAX_PENDING)
          return { first: false, reply: false };
        save({ ...state, pending: [...state.pending, { sender, name: name?.slice(0, 128), first_seen: at, refused_at: at }] });
        return { first: true, reply: true };
      }
      // Written only when a refusal is due: a stranger's flood costs no write per message.
      const last = waiting.refused_at === undefined ? Number.NaN : Date.parse(waiting.refused_at);
      if (now.getTime() - last < everyMs) return { first: false, reply: false };
      save({ ...state, pending: state.pending.map((p) => (p === waiting ? { ...p, refused_at: at } : p)) });
      return { first: false, reply: true };
    },
    pending: () => load().pending,
    approve(sender) {
      const state = load();
      const wasPending = state.pending.some((p) => p.sender === sender);
      const already = state.approved.includes(sender);
      save({
        ...state,
        approved: already ? state.approved : [...state.approved, sender],
        pending: state.pending.filter((p) => p.sender !== sender),
        denied: state.denied.filter((d) => d !== sender),
      });
      return { approved: true, was_pending: wasPending, already };
    },
    deny(sender) {
      const state = load();
      const wasPending = state.pending.some((p) => p.sender === sender);
      if (!wasPending) return { was_pending: false };
      save({
        ...state,
        pending: state.pending.filter((p) => p.sender !== sender),
        denied: [...state.denied.filter((d) => d !== sender), sender].slice(-MAX_PENDING),
      });
      return { was_pending: true };
    },
    isDenied: (sender) => load().denied.includes(sender),
  };
}
