import { $, state } from './state.js';

/** An error as /chat/api and the socket word it: a stable code, a message, the field it is about. */
export interface ChatError {
  code?: string;
  message: string;
  status?: number;
  field?: string;
}

interface ErrorBody {
  error?: { code?: string; message?: string; issues?: Array<{ field: string; reason: string }> };
}

// crypto.randomUUID needs a secure context; a chat served on a LAN address over http is not one.
export function uuid(): string {
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6]! & 15) | 64;
  b[8] = (b[8]! & 63) | 128;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
  return h.slice(0, 8) + '-' + h.slice(8, 12) + '-' + h.slice(12, 16) + '-' + h.slice(16, 20) + '-' + h.slice(20);
}

export async function api<T = Record<string, unknown>>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(path, {
    method,
    headers: body ? { 'content-type': 'application/json' } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  const data: unknown = await res.json().catch(() => ({}));
  if (!res.ok) {
    const e = (data as ErrorBody).error ?? {};
    const issue = (e.issues ?? [])[0];
    throw Object.assign(new Error(issue ? issue.field + ': ' + issue.reason : e.message || res.statusText), {
      code: e.code,
      status: res.status,
      field: issue?.field,
    });
  }
  return data as T;
}

export function showError(e: ChatError | null | undefined): void {
  if (e && e.status === 401) return loggedOut(e);
  $('alert').textContent = e ? (e.code || 'ERROR') + ': ' + e.message : '';
}

/** No login (never, expired, revoked, or two cookies): the page says so and stops reconnecting. */
export function loggedOut(e: ChatError | null | undefined): void {
  state.out = true;
  $('app').hidden = true;
  $('out').hidden = false;
  $('why').textContent = e && e.message && !/^not logged in/.test(e.message) ? e.message + '.' : '';
}

/** For promise chains: whatever was thrown, shown. */
export const showAny = (e: unknown): void => showError(e as ChatError);
