import type { ApprovalDecision, ApprovalView } from '../../../store/approvals.js';
import { showError } from './api.js';
import { appendToLog } from './render.js';
import { state } from './state.js';

const CHOICES: Array<[ApprovalDecision, string]> = [
  ['once', 'Allow once'],
  ['session', 'Allow for this session'],
  ['deny', 'Deny'],
];
const ANSWERED: Record<string, string> = { once: 'Allowed for this message', session: 'Allowed for this conversation', deny: 'Denied' };

/** The agent asks for a host outside the project's allowlist: the person answers here (or is told the operator was asked). */
export function showApproval(a: Pick<ApprovalView, 'id' | 'kind' | 'target' | 'approver' | 'asked_at' | 'expires_at'>): void {
  if ((a.kind !== 'egress' && a.kind !== 'secret') || document.getElementById('approval-' + a.id)) return;
  const secret = a.kind === 'secret' ? a.target.split(' for ') : undefined;
  const el = document.createElement('div');
  el.className = 'msg approval';
  el.id = 'approval-' + a.id;
  el.setAttribute('role', 'group');
  el.setAttribute('aria-label', secret ? 'your agent asks to use the secret ' + a.target : 'your agent asks to reach ' + a.target);
  const what = document.createElement('p');
  what.className = 'ask';
  if (secret) {
    const name = document.createElement('strong');
    name.textContent = secret[0] ?? '';
    const host = document.createElement('strong');
    host.textContent = (secret[1] ?? '').replace(/:443$/, '');
    what.append('Your agent wants to use the secret ', name, ' for ', host, ' (berth adds it; your agent never sees it).');
  } else {
    const host = document.createElement('strong');
    host.textContent = a.target;
    what.append('Your agent wants to reach ', host, ', which this project does not allow.');
  }
  const when = document.createElement('p');
  when.className = 'when';
  const mins = Math.max(1, Math.round((Date.parse(a.expires_at) - Date.parse(a.asked_at)) / 60000));
  el.append(what);
  if (a.approver === 'operator') {
    when.textContent = 'The operator has been asked to allow it; it waits up to ' + mins + ' min.';
  } else {
    const choices = document.createElement('div');
    choices.className = 'choices';
    for (const [decision, label] of CHOICES) {
      const b = document.createElement('button');
      b.type = 'button';
      b.textContent = label;
      b.dataset.decision = decision;
      b.onclick = () => answerApproval(a.id, decision, el);
      choices.append(b);
    }
    el.append(choices);
    when.textContent = 'No answer within ' + mins + ' min: denied.';
  }
  el.append(when);
  appendToLog(el);
}

function answerApproval(id: string, decision: ApprovalDecision, el: HTMLElement): void {
  if (!state.ws || state.ws.readyState !== WebSocket.OPEN)
    return showError({ code: 'DISCONNECTED', message: 'not connected: answer again once the page reconnects' });
  for (const b of el.querySelectorAll('button')) b.disabled = true;
  state.ws.send(JSON.stringify({ type: 'approve', id, decision }));
}

/** Who answered, in the person's words: "you", "the operator", another person's name. */
function answerer(by: string): string | undefined {
  if (by === 'timeout' || by === 'berth') return undefined;
  if (by === 'operator') return 'the operator';
  return by === 'tenant:' + state.me?.tenant ? 'you' : by.replace(/^tenant:(web:)?/, '');
}

const clock = (iso: string) => new Date(iso).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });

/** An answer (or the end of waiting): the card's buttons give way to what happened, who answered and when; the card stays. */
export function settleApproval(m: { id: string; decision?: string; by?: string; at?: string; text?: string }): void {
  state.approvals.delete(m.id);
  const el = document.getElementById('approval-' + m.id);
  if (!el || el.classList.contains('settled')) return;
  const outcome = document.createElement('p');
  outcome.className = 'outcome';
  outcome.setAttribute('role', 'status');
  outcome.textContent = m.text
    ? m.text
    : m.by === 'berth'
      ? 'No longer waiting: the agent finished'
      : m.by === 'timeout'
        ? 'Nobody answered in time: denied'
        : (ANSWERED[m.decision ?? ''] || 'Answered') + (m.by === 'operator' ? ' (by the operator)' : '');
  const choices = el.querySelector('.choices');
  if (choices) choices.replaceWith(outcome);
  else el.querySelector('.when')?.replaceWith(outcome);
  el.querySelector('.when')?.remove();
  const who = m.by ? answerer(m.by) : undefined;
  if (who || m.at) {
    const by = document.createElement('p');
    by.className = 'by';
    by.textContent = [who && 'by ' + who, m.at && 'at ' + clock(m.at)].filter(Boolean).join(' ');
    outcome.after(by);
  }
  el.classList.add('settled', m.decision === 'deny' || m.by === 'timeout' || m.by === 'berth' || m.text ? 'denied' : 'allowed');
}

/** A card answered too late (answered already, timed out, its run ended) waits no more; another error gives its buttons back. */
export function approvalError(m: { id?: string; code: string; message: string }): boolean {
  const card = m.id ? document.getElementById('approval-' + m.id) : null;
  if (!card || !m.id) return false;
  if (m.code === 'APPROVAL_NOT_FOUND') {
    settleApproval({ id: m.id, text: 'No longer waiting: ' + m.message });
    return true;
  }
  for (const b of card.querySelectorAll('button')) b.disabled = false;
  return false;
}
