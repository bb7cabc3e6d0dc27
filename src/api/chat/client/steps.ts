import type { ProgressStep } from '../../../runs/agent-progress.js';
import type { RunStep } from '../../../store/run-log.js';
import { appendToLog } from './render.js';
import { state } from './state.js';

/** The agent's steps for the message in flight (live, open), or for a reply from the history (folded): a list under one line. */
function stepsBox(live: boolean): HTMLElement {
  if (live) {
    const current = document.querySelector<HTMLElement>('#log .msg.steps.current');
    if (current) return current;
  }
  const el = document.createElement('details');
  el.className = live ? 'msg steps current' : 'msg steps';
  el.append(document.createElement('summary'));
  if (live) {
    el.open = true;
    el.setAttribute('role', 'log');
    el.setAttribute('aria-live', 'polite');
    el.setAttribute('aria-label', 'what the agent is doing');
    state.steps = new Map();
  }
  appendToLog(el);
  return el;
}

/** "4 steps (some failed)"; "working: 2 steps" while the message is in flight. */
function countSteps(box: HTMLElement, live: boolean): void {
  const steps = box.querySelectorAll('.step');
  const failed = box.querySelector('.step.failed') !== null;
  const words = steps.length + (steps.length === 1 ? ' step' : ' steps') + (failed ? ' (some failed)' : '');
  box.querySelector('summary')!.textContent = live ? (steps.length ? 'working: ' + words : 'working…') : words;
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
  ms.textContent =
    step.state === 'running'
      ? 'running…'
      : step.ms !== undefined
        ? step.ms < 1000
          ? Math.round(step.ms) + ' ms'
          : (step.ms / 1000).toFixed(1) + ' s'
        : '';
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
  countSteps(box, true);
  el.scrollIntoView({ block: 'end' });
}

export function onNote(text: string): void {
  const el = document.createElement('div');
  el.className = 'agent-note';
  el.textContent = text;
  const box = stepsBox(true);
  box.append(el);
  countSteps(box, true);
  el.scrollIntoView({ block: 'end' });
}

/** A reply's steps from the history: folded under a count. */
export function addSteps(steps: RunStep[]): void {
  const box = stepsBox(false);
  for (const step of steps) {
    const el = document.createElement('div');
    renderStep(el, step);
    box.append(el);
  }
  countSteps(box, false);
}

/** The answer arrived: the steps fold above it, without the agent's last words (the answer shows them once, below). */
export function closeLiveSteps(answer: string): void {
  const steps = document.querySelector<HTMLDetailsElement>('#log .msg.steps.current');
  if (!steps) return;
  steps.classList.remove('current');
  steps.removeAttribute('aria-live');
  const last = steps.lastElementChild;
  if (last && last.className === 'agent-note' && (last.textContent ?? '').trim() === answer.trim()) last.remove();
  if (!steps.querySelector('.step, .agent-note')) return steps.remove();
  countSteps(steps, false);
  // Only steps fold: the agent's notes on the way are part of what it said.
  if (!steps.querySelector('.agent-note')) steps.open = false;
}
