/** Small DOM helpers of the console: every text written with textContent (every name on the page is someone else's text). */
export function $(id: string): HTMLElement {
  const el = document.getElementById(id);
  if (!el) throw new Error(`the page has no #${id}`);
  return el;
}
export const $input = (id: string) => $(id) as HTMLInputElement;

export function cell(text: string | number | null | undefined, cls?: string): HTMLTableCellElement {
  const td = document.createElement('td');
  td.textContent = text === null || text === undefined ? '—' : String(text);
  if (cls) td.className = cls;
  return td;
}

/** A table in the box `id`, or the words saying it is empty. */
export function table(id: string, head: string[], rows: HTMLTableCellElement[][], empty: string): void {
  const box = $(id);
  if (!rows.length) {
    const p = document.createElement('p');
    p.className = 'empty';
    p.textContent = empty;
    box.replaceChildren(p);
    return;
  }
  const t = document.createElement('table');
  const tr = document.createElement('tr');
  for (const h of head) {
    const th = document.createElement('th');
    th.textContent = h;
    th.scope = 'col';
    tr.append(th);
  }
  const thead = document.createElement('thead');
  thead.append(tr);
  const tbody = document.createElement('tbody');
  for (const r of rows) {
    const row = document.createElement('tr');
    row.append(...r);
    tbody.append(row);
  }
  t.append(thead, tbody);
  box.replaceChildren(t);
}

/** A button that acts, says what failed, then shows the new state (`after`). */
export function button(label: string, onclick: () => Promise<unknown>, after: () => Promise<void>): HTMLButtonElement {
  const b = document.createElement('button');
  b.type = 'button';
  b.textContent = label;
  b.onclick = async () => {
    b.disabled = true;
    try {
      await onclick();
      $('alert').textContent = '';
    } catch (e) {
      $('alert').textContent = (e as Error).message;
    }
    await after();
  };
  return b;
}

export function actions(...buttons: HTMLButtonElement[]): HTMLTableCellElement {
  const td = document.createElement('td');
  td.append(...buttons);
  return td;
}

export const ago = (iso: string): string => {
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  return s < 60
    ? Math.round(s) + ' s ago'
    : s < 3600
      ? Math.round(s / 60) + ' min ago'
      : s < 86400
        ? Math.round(s / 3600) + ' h ago'
        : iso.slice(0, 16).replace('T', ' ');
};

interface ErrorBody {
  error?: { code?: string; message?: string };
}

export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(path, {
    method,
    headers: body ? { 'content-type': 'application/json' } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  const data: unknown = await res.json().catch(() => ({}));
  if (res.status === 401) {
    location.reload();
    throw new Error('signed out');
  }
  const e = (data as ErrorBody).error ?? {};
  if (!res.ok) throw new Error((e.code || res.status) + ': ' + (e.message || res.statusText));
  return data as T;
}

/** A link within the page (a run, a session, a tenant: `#run/<project>/<id>`); its text is someone else's, written as text. */
export function link(text: string, ...route: string[]): HTMLAnchorElement {
  const a = document.createElement('a');
  a.href = '#' + route.map(encodeURIComponent).join('/');
  a.textContent = text;
  return a;
}

export function linkCell(text: string | null | undefined, ...route: string[]): HTMLTableCellElement {
  if (text === null || text === undefined || text === '') return cell(text);
  const td = document.createElement('td');
  td.append(link(text, ...route));
  return td;
}

export function el<K extends keyof HTMLElementTagNameMap>(tag: K, text?: string, cls?: string): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

/**
 * A button whose action is confirmed in the page (no confirm() dialog): pressed, it shows what
 * will happen, an optional reason field, and "Yes" / "Cancel". Yes acts, says what failed, then
 * shows the new state (`after`).
 */
export function confirmButton(
  label: string,
  consequence: string,
  act: (input: string) => Promise<unknown>,
  after: () => Promise<void>,
  opts: { input?: string; yes?: string; danger?: boolean } = {},
): HTMLSpanElement {
  const box = el('span', undefined, 'act');
  const start = el('button', label, opts.danger ? 'danger' : undefined);
  start.type = 'button';
  box.append(start);
  start.onclick = () => {
    const ask = el('span', undefined, 'confirm');
    ask.setAttribute('role', 'group');
    ask.setAttribute('aria-label', label);
    const input = opts.input === undefined ? undefined : el('input');
    if (input) {
      input.placeholder = opts.input as string;
      input.maxLength = 500;
      input.setAttribute('aria-label', opts.input as string);
    }
    const yes = el('button', opts.yes ?? 'Yes, ' + label.toLowerCase(), 'danger');
    const no = el('button', 'Cancel');
    yes.type = no.type = 'button';
    ask.append(el('span', consequence, 'consequence'), ...(input ? [input] : []), yes, no);
    box.replaceChildren(ask);
    yes.focus();
    no.onclick = () => box.replaceChildren(start);
    yes.onclick = async () => {
      yes.disabled = no.disabled = true;
      try {
        await act(input?.value.trim() ?? '');
        $('alert').textContent = '';
        box.replaceChildren(el('span', 'done', 'ok'));
      } catch (e) {
        $('alert').textContent = (e as Error).message;
        box.replaceChildren(start);
      }
      await after();
    };
  };
  return box;
}

export const mb = (bytes: number | null | undefined): string =>
  bytes === null || bytes === undefined ? '—' : (bytes / 1048576).toFixed(bytes < 10 * 1048576 ? 1 : 0) + ' MiB';
