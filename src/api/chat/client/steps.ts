import type { ProgressStep } from '../../../runs/agent-progress.js';
import type { RunStep } from '../../../store/run-log.js';
import { $, state } from './state.js';

/** The agent's steps for the message in flight (live), or for a reply from the history (folded). */
function stepsBox(live: boolean): HTMLElement {
  if (live) {
    let el = document.querySelector<HTMLElement>('#log .msg.steps.current');
    if (el) return el;
    el = document.createElement('div');
    el.className = 'msg steps current';
    el.setAttribute('role', 'log');
    el.setAttribute('aria-live', 'polite');
    el.setAttribute('aria-label', 'what the agent is doing');
    $('log').append(el);
    state.steps = new Map();
    return el;
  }
  const el = document.createElement('details');
  el.className = 'msg steps';
  $('log').append(el);
  return el;
}

type Step = ProgressStep | RunStep;
const STEP_MARK: Record<string, string> = { running: '▸', ok: '✓', failed: '✗', ended: '·' };

/** One tool call: its mark, tool, what it works on, how long it took, a short result. */
function renderStep(el: HTMLElement, step: Step): void {
  el.className = 'step ' + step.state;
  el.replaceChildren();
  const tool = document.createElement('span');
  tool.className = 'tool';
  tool.textContent = (STEP_MARK[step.state] || '·') + ' ' + step.tool;
  const detail = document.createElement('span');
  detail.textContent = step.detail;
  el.append(tool, detail);
  const ms = document.createElement('span');
  ms.className = 'ms';
  ms.textContent = step.state === 'running' ? 'running…' : step.ms !== undefined ? (step.ms < 1000 ? Math.round(step.ms) + ' ms' : (step.ms / 1000).toFixed(1) + ' s') : '';
  el.append(ms);
  if ('result' in step && step.result) {
    const res = document.createElement('div');
    res.className = 'res';
    res.textContent = step.result;
    el.append(res);
  }
  el.setAttribute('aria-label', step.tool + ' ' + step.detail + ': ' + step.state);
}

export function onStep(step: ProgressStep): void {
  const box = stepsBox(true);
  let el = state.steps.get(step.id);
  if (!el) {
    el = document.createElement('div');
    state.steps.set(step.id, el);
    box.append(el);
  }
  renderStep(el, step);
  el.scrollIntoView({ block: 'end' });
}

export function onNote(text: string): void {
  const el = document.createElement('div');
  el.className = 'agent-note';
  el.textContent = text;
  stepsBox(true).append(el);
  el.scrollIntoView({ block: 'end' });
}

/** A reply's steps from the history: folded under a count. */
export function addSteps(steps: RunStep[]): void {
  const box = stepsBox(false);
  const summary = document.createElement('summary');
  summary.textContent = steps.length + (steps.length === 1 ? ' step' : ' steps') + (steps.some((s) => s.state === 'failed') ? ' (some failed)' : '');
  box.append(summary);
  for (const step of steps) {
    const el = document.createElement('div');
    renderStep(el, step);
    box.append(el);
  }
}

/** The answer arrived: the live steps stay above it, without the agent's last words (the answer shows them once, below). */
export function closeLiveSteps(answer: string): void {
  const steps = document.querySelector('#log .msg.steps.current');
  if (!steps) return;
  steps.classList.remove('current');
  const last = steps.lastElementChild;
  if (last && last.className === 'agent-note' && (last.textContent ?? '').trim() === answer.trim()) last.remove();
  if (!steps.firstChild) steps.remove();
}
