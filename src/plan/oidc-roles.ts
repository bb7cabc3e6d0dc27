import { createHash } from 'node:crypto';
import type { OidcConfig, OidcPeople } from '../config/oidc.js';

/** What the provider vouched for about a person (the ID token's claims, with the userinfo answer). */
export interface OidcClaims {
  sub: string;
  email?: unknown;
  email_verified?: unknown;
  [claim: string]: unknown;
}

export type ConsoleRole = 'operator' | 'viewer';

/** Who a signed-in person is to berth: their console role, the projects they may chat with, and names for logs and the tenant. */
export interface OidcDecision {
  /** For the audit log and the console: the verified email, else the subject. */
  who: string;
  console?: ConsoleRole;
  chatProjects: string[];
  /** The web chat user (tenant key = the same string): "oidc:<subject>", or its digest when the subject has other characters. */
  chatUser: string;
}

const SAFE_SUBJECT = /^[A-Za-z0-9._@-]{1,64}$/;

/** The chat user for a subject of the configured issuer (one issuer per berth, so the subject alone is unique). */
export function chatUserOfSubject(sub: string): string {
  return `oidc:${SAFE_SUBJECT.test(sub) ? sub : `sha256.${createHash('sha256').update(sub).digest('base64url').slice(0, 32)}`}`;
}

/** A verified email in lower case, or undefined (an unverified address names nobody: anyone can type one into a provider). */
function verifiedEmail(claims: OidcClaims): string | undefined {
  return typeof claims.email === 'string' && claims.email_verified === true ? claims.email.toLowerCase() : undefined;
}

function groupsOf(claims: OidcClaims, claim: string): string[] {
  const value = Object.hasOwn(claims, claim) ? claims[claim] : undefined;
  if (typeof value === 'string') return [value];
  return Array.isArray(value) ? value.filter((g): g is string => typeof g === 'string').slice(0, 1000) : [];
}

function matches(people: OidcPeople, email: string | undefined, groups: string[]): boolean {
  if (email !== undefined) {
    if (people.emails.some((e) => e.toLowerCase() === email)) return true;
    const domain = email.slice(email.lastIndexOf('@') + 1);
    if (people.domains.includes(domain)) return true;
  }
  return groups.some((g) => people.groups.includes(g));
}

/** The whole decision, from claims and berth.yaml's oidc (operator wins over viewer). */
export function decideOidcAccess(config: OidcConfig, claims: OidcClaims): OidcDecision {
  const email = verifiedEmail(claims);
  const groups = groupsOf(claims, config.groups_claim);
  const role: ConsoleRole | undefined = matches(config.operators, email, groups)
    ? 'operator'
    : matches(config.viewers, email, groups)
      ? 'viewer'
      : undefined;
  return {
    who: email ?? `subject ${claims.sub}`,
    ...(role ? { console: role } : {}),
    chatProjects: matches(config.chat.people, email, groups) ? config.chat.projects : [],
    chatUser: chatUserOfSubject(claims.sub),
  };
}
