/**
 * Text someone else chose (a tenant key, a session id, a path), made safe for a terminal line:
 * control characters (C0, DEL, C1) and the bidi overrides that reorder what a reader sees are
 * written as escapes, so input can neither forge rows (newlines, tabs) nor drive the terminal
 * (ESC sequences retitling it or moving the cursor).
 */
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

export function printable(text: string): string {
  return text.replace(UNSAFE, (ch) => NAMED[ch] ?? `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
