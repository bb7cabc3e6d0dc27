import type { OidcConfig } from '../../config/oidc.js';
import type { SignInFor } from './flows.js';
import { escapeHtml } from '../../base/escape-html.js';

/** The sign-in's own pages: no script, never framed, never cached, and nothing sent onward as a referrer. */
export const SIGN_IN_PAGE_HEADERS: Record<string, string> = {
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
};

const WHERE: Record<SignInFor, { path: string; name: string }> = {
  console: { path: '/console', name: 'the console' },
  chat: { path: '/chat', name: 'the chat' },
};

const page = (body: string, head = '') =>
  `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>berth — sign in</title>${head}
<style>body{font:16px system-ui,sans-serif;max-width:30rem;margin:4rem auto;padding:0 1rem;color:#1d2430}.error{color:#b00}a.button{display:inline-block;padding:.5rem 1rem;border-radius:.4rem;background:#1f5fbf;color:#fff;text-decoration:none}</style></head>
<body><h1>berth</h1>${body}</body></html>`;

/** Signed in: the page moves on to where the person was going (from this origin, so the new Strict cookie goes with it). */
export function signInOnward(to: SignInFor): string {
  const { path, name } = WHERE[to];
  return page(
    `<p>You are signed in.</p><p><a class="button" id="onward" href="${path}">Open ${name}</a></p>`,
    `<meta http-equiv="refresh" content="0;url=${path}">`,
  );
}

/** Not signed in, and why, in words; and the way to try again. */
export function signInRefused(message: string, to: SignInFor): string {
  return page(
    `<p class="error" role="alert">${escapeHtml(message)}</p><p><a class="button" href="/oidc/start?to=${to}">Sign in again</a></p>`,
  );
}

/** The link a login page shows when berth.yaml has a provider (the chat's, when it names chat projects); else nothing. */
export function ssoLinkFor(oidc: OidcConfig | undefined, to: SignInFor): string {
  if (!oidc || (to === 'chat' && oidc.chat.projects.length === 0)) return '';
  return `<p class="sso"><a class="button" id="sso" href="/oidc/start?to=${to}">Sign in with ${escapeHtml(oidc.name)}</a></p>`;
}
