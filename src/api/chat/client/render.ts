import type { AgentKind } from '../../../bridges/web-protocol.js';
import type { OutputSegment, ReplyFormat } from '../../../store/chat-transcripts.js';
import { $, state } from './state.js';

/** Copy a code block's text (the clipboard API needs a secure context: else a selection and copy). */
async function copyText(text: string, button: HTMLButtonElement): Promise<void> {
  try {
    await navigator.clipboard.writeText(text);
  } catch {
    const area = document.createElement('textarea');
    area.value = text;
    document.body.append(area);
    area.select();
    document.execCommand('copy');
    area.remove();
  }
  button.textContent = 'Copied';
  setTimeout(() => (button.textContent = 'Copy'), 1500);
}

/**
 * An answer in Markdown: rendered, then sanitized (no script, no handler, no form, no image: an
 * image would be a request the answer makes for itself, and the page's CSP loads none) before it
 * is shown.
 */
function markdown(text: string): HTMLElement {
  const box = document.createElement('div');
  box.className = 'md';
  const html = window.marked!.parse(text, { gfm: true, breaks: true, async: false });
  box.innerHTML = window.DOMPurify!.sanitize(html, {
    USE_PROFILES: { html: true },
    FORBID_TAGS: ['style', 'form', 'input', 'button', 'img'],
    FORBID_ATTR: ['style'],
  });
  for (const a of box.querySelectorAll<HTMLAnchorElement>('a[href]')) {
    a.target = '_blank';
    a.rel = 'noopener noreferrer';
  }
  for (const pre of box.querySelectorAll('pre')) {
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'copy';
    button.textContent = 'Copy';
    button.setAttribute('aria-label', 'copy this code');
    button.onclick = () => void copyText((pre.querySelector('code') ?? pre).textContent ?? '', button);
    pre.append(button);
  }
  return box;
}

/** A reply's output as it was printed: stdout and stderr in order, stderr marked; the exit status when not 0. */
function printedOutput(output: OutputSegment[], exit: number | undefined): HTMLElement {
  const pre = document.createElement('pre');
  for (const part of output) {
    const span = document.createElement('span');
    span.className = part.stream;
    if (part.stream === 'stderr') span.title = 'stderr';
    span.textContent = part.text;
    pre.append(span);
  }
  if (exit !== undefined && exit !== 0) {
    const status = document.createElement('div');
    status.className = 'exit';
    status.textContent = 'exit ' + exit;
    pre.append(status);
  }
  return pre;
}

/**
 * berth's own words (a command's answer, a notice): in the page's font, a line each, and a line
 * that starts "- " an item whose wrapped lines stay under its first word. Its text is the reply's, as it was sent.
 */
function berthWords(text: string): HTMLElement {
  const pre = document.createElement('pre');
  pre.className = 'berth';
  const lines = text.split('\n');
  lines.forEach((line, i) => {
    const span = document.createElement('span');
    const end = i < lines.length - 1 ? '\n' : '';
    if (line.startsWith('- ')) {
      span.className = 'line item';
      span.append(Object.assign(document.createElement('span'), { className: 'dash', textContent: '- ' }), line.slice(2) + end);
    } else {
      span.className = 'line';
      span.textContent = line + end;
    }
    pre.append(span);
  });
  return pre;
}

export type Role = 'user' | 'reply' | 'live';

export function add(role: Role, text: string, format?: ReplyFormat, output?: OutputSegment[], exit?: number): HTMLElement {
  const el = document.createElement('div');
  el.className = 'msg ' + role;
  if (role === 'reply' && output && output.length) el.append(printedOutput(output, exit));
  else if (role === 'reply' && format === 'berth') el.append(berthWords(text));
  else if (role === 'reply' && format === 'markdown' && window.marked && window.DOMPurify) el.append(markdown(text));
  else {
    const pre = document.createElement('pre');
    pre.textContent = text;
    el.append(pre);
  }
  appendToLog(el);
  return el;
}

/** A new part of the conversation, at its end (the empty state gives way), in view. */
export function appendToLog(el: HTMLElement): void {
  document.getElementById('empty-state')?.remove();
  $('log').append(el);
  el.scrollIntoView({ block: 'end' });
}

const CODING_AGENT = { claude: 'Claude Code', codex: 'Codex', droid: "Factory's Droid" } as const;

/** What the empty state says the agent is and what to try (the project's agent preset). */
export function describeAgent(agent: AgentKind): void {
  const what = document.querySelector('#empty .what');
  if (!what) return;
  const code = (text: string) => Object.assign(document.createElement('code'), { textContent: text });
  if (agent === 'shell') {
    what.replaceChildren(
      "This agent is a shell: it runs your message as a command (sh -c) in the project's folder, inside its own container. Try ",
      code('ls -la'),
      ' or ',
      code('echo hello > notes.txt'),
      '.',
    );
  } else if (agent === 'custom') {
    what.textContent =
      "This agent is the project's own program: your message is its input. It works in the project's folder, inside its own container.";
  } else {
    what.textContent = `This agent is ${CODING_AGENT[agent]}, a coding agent that works in the project's folder, inside its own container. Ask in plain words, for example "what is in this folder?"`;
  }
}

/** A conversation with nothing in it yet says what to do. */
export function showEmpty(): void {
  const empty = $('empty').cloneNode(true) as HTMLElement;
  empty.id = 'empty-state';
  empty.hidden = false;
  $('log').replaceChildren(empty);
}

/** Where the level changes in a conversation (and what it starts at): a note before the message. */
export function noteLevel(level: string | undefined): void {
  if (!level || level === state.lastLevel) return;
  const el = document.createElement('div');
  el.className = 'msg note';
  el.textContent = (state.lastLevel ? 'level changed to ' : 'level ') + level;
  document.getElementById('empty-state')?.remove();
  $('log').append(el);
  state.lastLevel = level;
}

/** The output of the message in flight, as it streams. */
export function liveBlock(): HTMLElement {
  const el = document.querySelector<HTMLElement>('#log .msg.live') ?? add('live', '');
  return el.firstElementChild as HTMLElement;
}

/** The line under the log while a message is answered: its new container starting, then the agent at work. */
export function showWorking(): void {
  $('typing').textContent = state.starting ? 'starting your container…' : state.typing ? 'the agent is working…' : '';
  $('typing').classList.toggle('starting', state.starting);
}
