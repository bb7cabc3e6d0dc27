import { z } from 'zod';

/**
 * Signing in with the organisation's identity provider (OpenID Connect, authorization code +
 * PKCE): operators and viewers of the console, and chat users of the web chat. Who gets what is
 * decided by the claims the provider vouches for (plan/oidc-roles.ts); nothing else is trusted.
 * The admin token and chat links keep working beside it.
 */
const EmailSchema = z.string().regex(/^[^\s@]{1,64}@[^\s@]{1,255}$/, 'must be an email address');
const DomainSchema = z.string().regex(/^[a-z0-9.-]{1,253}$/, 'must be a domain in lower case, e.g. example.org');
const GroupSchema = z.string().min(1).max(200);

/** Who a rule lets in: any of these (a verified email, its domain, a group the provider names). */
export const OidcPeopleSchema = z
  .object({
    emails: z.array(EmailSchema).max(1000).default([]).describe('Exact email addresses (only when the provider says email_verified).'),
    domains: z.array(DomainSchema).max(100).default([]).describe('Email domains (only when the provider says email_verified).'),
    groups: z.array(GroupSchema).max(100).default([]).describe('Group names in the groups claim.'),
  })
  .strict()
  .prefault({});
export type OidcPeople = z.output<typeof OidcPeopleSchema>;

export const OidcSchema = z
  .object({
    issuer: z.url({ protocol: /^https?$/ }).describe("The provider's issuer URL (its /.well-known/openid-configuration is read)."),
    client_id: z.string().min(1).max(200),
    client_secret_file: z
      .string()
      .min(1)
      .optional()
      .describe('A file holding the client secret (0600); without one berth is a public client (PKCE only).'),
    redirect_uri: z
      .url({ protocol: /^https?$/ })
      .optional()
      .describe("The callback the provider sends people back to; default <bridges.public_url or this request's origin>/oidc/callback."),
    scopes: z
      .array(z.string().regex(/^[\x21-\x7e]{1,100}$/))
      .max(20)
      .default(['openid', 'email', 'profile']),
    groups_claim: z.string().min(1).max(100).default('groups').describe("The claim that lists a person's groups."),
    name: z.string().min(1).max(60).default('your organisation').describe('How the sign-in button names the provider.'),
    operators: OidcPeopleSchema.describe('Who may see and act in the console.'),
    viewers: OidcPeopleSchema.describe('Who may see the console and not act.'),
    chat: z
      .object({
        people: OidcPeopleSchema.describe('Who may use the web chat (tenant "oidc:<subject>").'),
        projects: z
          .array(z.string().min(1).max(100))
          .max(100)
          .default([])
          .describe('The projects they may chat with; the first is the default.'),
        login_hours: z
          .number()
          .int()
          .min(1)
          .max(24 * 30)
          .default(24 * 7)
          .describe('How long a chat sign-in lasts.'),
      })
      .strict()
      .prefault({}),
  })
  .strict();
export type OidcConfig = z.output<typeof OidcSchema>;
