import { chatAssets } from './assets.js';
import { escapeHtml } from '../../base/escape-html.js';

/**
 * The web chat page: one HTML document, its script and style (client/, bundled by
 * ../page-bundle.ts) and the two libraries berth serves itself (assets.ts), all from this origin
 * at paths that name their content (no CDN: it works offline), under a strict CSP. The script
 * writes textContent, except an answer in Markdown (the project's chat format): rendered by
 * marked and sanitized by DOMPurify before it is shown. Wire shapes: src/bridges/web-protocol.ts.
 */
const BODY = `<div id="app">
<header><div class="brand"><span class="logo" aria-hidden="true">b</span><div class="brand-text"><h1 id="title">berth chat</h1><span id="who"></span></div></div>
<div class="controls"><label class="session"><span class="label">Session</span><select id="session" aria-label="session"></select></label><button id="new" type="button" title="Start a new conversation" aria-label="New session">New</button><button id="rename" type="button" title="Name this conversation">Rename</button><button id="delete" type="button" title="Delete this conversation" aria-label="Delete session">Delete</button>
<label><span class="label">Level</span><select id="level" aria-label="permission level"><option value="low">low</option><option value="medium">medium</option><option value="high">high</option></select></label></div>
<span id="status" role="status"></span></header>
<div id="alert" role="alert"></div>
<main id="log" aria-live="polite"></main>
<div id="empty" hidden><h2>Start a conversation</h2><p class="what">Your agent works in this project's files, in its own container.</p><p>Type <code>/help</code> for the chat's commands.</p></div>
<div id="typing"></div>
<dialog id="ask" aria-labelledby="ask-text"><p id="ask-text"></p><input id="ask-input" aria-label="name" maxlength="80" autocomplete="off"><div class="dialog-buttons"><button id="ask-cancel" type="button">Cancel</button><button id="ask-ok" type="button">OK</button></div></dialog>
<div id="attachments" hidden aria-label="files for the next message"></div>
<form id="composer"><button id="attach" type="button" title="Attach files (or paste, or drop them on the page)" aria-label="Attach files">+</button><input id="file" type="file" multiple hidden><textarea id="input" rows="1" aria-label="message" placeholder="Message your agent…"></textarea><button id="send" type="submit" disabled>Send</button></form>
</div>
<div id="out" hidden><h1>berth chat</h1><p>You are not logged in. <span id="why"></span></p><p>Open the chat link your admin gave you: it logs this browser in, once. If you used it already, or it expired, ask the admin for a new one.</p>`;

/** The page and the headers it needs (its CSP allows scripts and styles from this origin only, none inline). */
export function chatPage(host: string | undefined, sso = ''): { html: string; headers: Record<string, string> } {
  const known = host && /^[A-Za-z0-9.[\]:-]{1,300}$/.test(host);
  const socketOrigins = known ? ` ws://${host} wss://${host}` : '';
  // Images only from berth's own route for a run's files (an agent's chart): nothing else, no other path of this origin.
  const images = known ? `; img-src http://${host}/chat/api/runs/ https://${host}/chat/api/runs/` : '';
  const { marked, purify, script, style } = chatAssets();
  return {
    html: `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>berth chat</title><link rel="stylesheet" href="${style.path}"></head>\n<body>${BODY}${sso}</div><script src="${marked.path}"></script><script src="${purify.path}"></script><script src="${script.path}"></script></body></html>`,
    headers: {
      'content-security-policy': `default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'${socketOrigins}${images}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`,
      'referrer-policy': 'no-referrer',
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
    },
  };
}

/** A login page: the chat's own stylesheet (no script), one card. */
const plainPage = (body: string) =>
  `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>berth chat</title><link rel="stylesheet" href="${chatAssets().style.path}"></head><body><main class="card"><h1><span class="logo" aria-hidden="true">b</span>berth chat</h1>${body}</main></body></html>`;

/**
 * The login pages (/chat/login): no script, the chat's stylesheet, a form that may post to this origin only,
 * never framed. Referrer policy same-origin, not no-referrer: with no-referrer the browser sends
 * "Origin: null" on the form's POST, and the login could not tell its own page from a stranger's.
 */
export const LOGIN_PAGE_HEADERS: Record<string, string> = {
  'content-security-policy': "default-src 'none'; style-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  'referrer-policy': 'same-origin',
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
};

/** A link that works, opened: it asks first, so a link-preview fetcher's GET uses nothing up. */
export function chatLoginConfirmPage(token: string, who: { project: string; user: string }): string {
  const user = escapeHtml(who.user);
  return plainPage(
    `<p>This link logs this browser in to the chat as <strong>${user}</strong> in project <strong>${escapeHtml(who.project)}</strong>. It works once.</p>` +
      `<form method="post" action="/chat/login"><input type="hidden" name="token" value="${escapeHtml(token)}"><button type="submit" id="login">Log in as ${user}</button></form>`,
  );
}

/** The one page for a link that does not work, whatever the reason (used, expired, revoked, unknown). */
export function chatLoginFailedPage(reason = 'This chat link does not work.'): string {
  return plainPage(
    `<p role="alert">${escapeHtml(reason)}</p><p>A chat link works once and for a short time. If you opened it before, that browser is logged in; otherwise ask the admin for a new one.</p>`,
  );
}
