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
  pending: z.array(z.object({ sender: z.string(), name: z.string().optional(), first_seen: z.string() })).default([]),
});
type State = z.infer<typeof StateSchema>;

export interface BridgeState {
  generation(chat: string): number;
  /** Start the chat's next conversation; returns its generation. */
  nextGeneration(chat: string): number;
  isApproved(sender: string): boolean;
  addPending(sender: string, name?: string): void;
  pending(): State['pending'];
  approve(sender: string): { approved: boolean; was_pending: boolean };
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
    addPending(sender, name) {
      const state = load();
      if (state.approved.includes(sender) || state.pending.some((p) => p.sender === sender) || state.pending.length >= MAX_PENDING) return;
      save({ ...state, pending: [...state.pending, { sender, name: name?.slice(0, 128), first_seen: new Date().toISOString() }] });
    },
    pending: () => load().pending,
    approve(sender) {
      const state = load();
      const wasPending = state.pending.some((p) => p.sender === sender);
      save({ ...state, approved: state.approved.includes(sender) ? state.approved : [...state.approved, sender], pending: state.pending.filter((p) => p.sender !== sender) });
      return { approved: true, was_pending: wasPending };
    },
  };
}
