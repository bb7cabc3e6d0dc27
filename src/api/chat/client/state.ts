import type { ApprovalView } from '../../../store/approvals.js';
import type { ChatMe, ChatSessionView } from '../../../bridges/web-protocol.js';

/** What the page holds between events: who is logged in, the shown session, the socket, the message in flight. */
export interface ChatState {
  me: ChatMe | null;
  session: string | null;
  sessions: ChatSessionView[];
  ws: WebSocket | null;
  pending: { id: string; command: boolean } | null;
  retry: number;
  out: boolean;
  steps: Map<string, HTMLElement>;
  approvals: Map<string, ApprovalView>;
  lastLevel: string | null;
  /** The shown session's message waits for a new container; the agent works (berth's typing). */
  starting: boolean;
  typing: boolean;
}

export const state: ChatState = {
  me: null,
  session: null,
  sessions: [],
  ws: null,
  pending: null,
  retry: 0,
  out: false,
  steps: new Map(),
  approvals: new Map(),
  lastLevel: null,
  starting: false,
  typing: false,
};

/** This browser's remembered choices, per project and person. */
export const key = (what: string): string => 'berth-chat:' + state.me?.project + ':' + state.me?.user + ':' + what;

export function $(id: string): HTMLElement {
  const el = document.getElementById(id);
  if (!el) throw new Error(`the page has no #${id}`);
  return el;
}
export const $input = (id: string) => $(id) as HTMLInputElement;
export const $select = (id: string) => $(id) as HTMLSelectElement;
