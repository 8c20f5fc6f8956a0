#!/usr/bin/env node
// Loopback OpenID Connect provider for gpupaas development and tests.
//
// Usage:
//   node server.js [--port N] [--config FILE] [--port-file FILE]
//
// Environment equivalents: OIDC_PROVIDER_PORT, OIDC_PROVIDER_CONFIG,
// OIDC_PROVIDER_PORT_FILE. Port 0 picks a free port. Once the provider is
// ready, one JSON line {"issuer": ..., "port": ...} is printed on stdout and,
// when a port file is named, the same JSON is written there (atomically).

import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import Provider from 'oidc-provider';

import MemoryAdapter, { endAllSessions, endedRefreshTokens } from './adapter.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const HOST = '127.0.0.1';
const LOOPBACKS = new Set(['127.0.0.1', 'localhost', '[::1]']);
const MAX_BODY = 64 * 1024;

const SCOPE_CLAIMS = {
  openid: ['sub'],
  email: ['email', 'email_verified'],
  profile: ['name', 'preferred_username'],
  groups: ['groups'],
};
const ALL_SCOPES = Object.keys(SCOPE_CLAIMS);
const ALL_CLAIMS = Object.values(SCOPE_CLAIMS).flat();

// Keys understood by this server on a client entry; everything else is
// passed to oidc-provider as client metadata.
const CLIENT_EXTENSIONS = ['loopback_any_port', 'id_token_ttl'];

function fail(message) {
  process.stderr.write(`oidc-provider: ${message}\n`);
  process.exit(2);
}

function parseCommandLine() {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        port: { type: 'string' },
        config: { type: 'string' },
        'port-file': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    }));
  } catch (err) {
    fail(err.message);
  }
  if (values.help) {
    process.stdout.write('usage: node server.js [--port N] [--config FILE] [--port-file FILE]\n');
    process.exit(0);
  }
  const portText = values.port ?? process.env.OIDC_PROVIDER_PORT ?? '9000';
  const port = Number.parseInt(portText, 10);
  if (!Number.isInteger(port) || port < 0 || port > 65535 || String(port) !== portText.trim()) {
    fail(`invalid port: ${portText}`);
  }
  return {
    port,
    configPath: values.config ?? process.env.OIDC_PROVIDER_CONFIG
      ?? path.join(HERE, 'config.dev.json'),
    portFile: values['port-file'] ?? process.env.OIDC_PROVIDER_PORT_FILE ?? null,
  };
}

function loadConfig(configPath) {
  let raw;
  try {
    raw = JSON.parse(fs.readFileSync(configPath, 'utf8'));
  } catch (err) {
    fail(`cannot read config ${configPath}: ${err.message}`);
  }
  const clients = raw.clients ?? [];
  const users = raw.users ?? [];
  if (!Array.isArray(clients) || clients.length === 0) fail('config needs a non-empty "clients" list');
  if (!Array.isArray(users)) fail('config "users" must be a list');

  const seenClients = new Set();
  for (const client of clients) {
    if (!client.client_id) fail('every client needs a client_id');
    if (seenClients.has(client.client_id)) fail(`duplicate client_id ${client.client_id}`);
    seenClients.add(client.client_id);
    if (!Array.isArray(client.redirect_uris) || client.redirect_uris.length === 0) {
      fail(`client ${client.client_id} needs redirect_uris`);
    }
  }
  const usersByName = new Map();
  const usersBySub = new Map();
  for (const user of users) {
    if (!user.username || typeof user.password !== 'string') {
      fail('every user needs a username and a password');
    }
    const sub = String(user.sub ?? user.username);
    if (usersByName.has(user.username) || usersBySub.has(sub)) {
      fail(`duplicate user ${user.username}`);
    }
    const groups = user.groups === undefined ? [] : user.groups;
    if (!validGroups(groups)) {
      fail(`user ${user.username}: groups must be a list of strings, a string or null`);
    }
    const record = { ...user, sub, groups, disabled: Boolean(user.disabled) };
    usersByName.set(user.username, record);
    usersBySub.set(sub, record);
  }
  return {
    clients,
    usersByName,
    usersBySub,
    idTokenTtl: raw.id_token_ttl ?? 3600,
    accessTokenTtl: raw.access_token_ttl ?? 3600,
    sessionTtl: raw.session_ttl ?? 8 * 3600,
    // Like Keycloak's "SSO Session Idle": a refresh token not used within this many seconds
    // expires; each refresh hands out a new one with a fresh window. Unset: session_ttl.
    refreshIdleTtl: raw.refresh_idle_ttl ?? null,
    dynamicRegistration: Boolean(raw.dynamic_registration),
    controlApi: Boolean(raw.control_api),
  };
}

// A user's groups: a list of strings (the usual claim), one string (some providers send a
// single group that way) or null (the claim is left out altogether).
function validGroups(groups) {
  if (groups === null || typeof groups === 'string') return true;
  return Array.isArray(groups) && groups.every((group) => typeof group === 'string');
}

function signingKeys() {
  const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = privateKey.export({ format: 'jwk' });
  return { keys: [{ ...jwk, kid: `dev-${crypto.randomBytes(6).toString('hex')}`, alg: 'RS256', use: 'sig' }] };
}

function escapeHtml(value) {
  return String(value ?? '')
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;')
    .replaceAll("'", '&#39;');
}

function page(title, body) {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>
body { font-family: system-ui, sans-serif; max-width: 24rem; margin: 4rem auto; padding: 0 1rem; }
label { display: block; margin-top: 1rem; }
input { width: 100%; padding: .4rem; box-sizing: border-box; }
button { margin-top: 1.2rem; padding: .5rem 1.2rem; }
.error { color: #a00; }
</style>
</head>
<body>
${body}
</body>
</html>
`;
}

function loginPage({ uid, clientName, username, error }) {
  const alert = error ? `<p class="error" role="alert">${escapeHtml(error)}</p>\n` : '';
  return page('Sign in', `<main>
<h1>Sign in</h1>
<p>to continue to ${escapeHtml(clientName)}</p>
${alert}<form method="post" action="/interaction/${escapeHtml(uid)}/login" autocomplete="off">
<label for="login">Username</label>
<input type="text" name="login" id="login" value="${escapeHtml(username)}" autocomplete="username" autofocus required>
<label for="password">Password</label>
<input type="password" name="password" id="password" autocomplete="current-password" required>
<button type="submit">Sign in</button>
</form>
<p><a href="/interaction/${escapeHtml(uid)}/abort">Cancel</a></p>
</main>`);
}

function send(res, status, html, headers = {}) {
  res.writeHead(status, {
    'Content-Type': 'text/html; charset=utf-8',
    'Cache-Control': 'no-store',
    ...headers,
  });
  res.end(html);
}

function readForm(req) {
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks = [];
    req.on('data', (chunk) => {
      size += chunk.length;
      if (size > MAX_BODY) {
        reject(new Error('request body too large'));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(new URLSearchParams(Buffer.concat(chunks).toString('utf8'))));
    req.on('error', reject);
  });
}

function passwordMatches(expected, given) {
  const a = crypto.createHash('sha256').update(expected).digest();
  const b = crypto.createHash('sha256').update(given).digest();
  return crypto.timingSafeEqual(a, b);
}

function buildProvider(issuer, config) {
  const { usersBySub } = config;
  const anyPortClients = new Set();
  const idTokenTtls = new Map();
  const clients = config.clients.map((entry) => {
    if (entry.loopback_any_port) anyPortClients.add(entry.client_id);
    if (entry.id_token_ttl !== undefined) idTokenTtls.set(entry.client_id, entry.id_token_ttl);
    const metadata = { ...entry };
    for (const key of CLIENT_EXTENSIONS) delete metadata[key];
    return metadata;
  });

  const provider = new Provider(issuer, {
    adapter: MemoryAdapter,
    clients,
    jwks: signingKeys(),
    cookies: { keys: [crypto.randomBytes(32).toString('hex')] },
    clientDefaults: {
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
      id_token_signed_response_alg: 'RS256',
    },
    responseTypes: ['code'],
    scopes: ['openid', 'offline_access', 'email', 'profile', 'groups'],
    claims: SCOPE_CLAIMS,
    conformIdTokenClaims: false,
    pkce: { required: (ctx, client) => client.clientAuthMethod === 'none' },
    // A refresh token for every client allowed the grant, without offline_access (as Keycloak
    // does): it ends with the login session, so signing out here also stops refreshes.
    issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
    // With an idle window every refresh rotates the token, so that an active user's session
    // lives on while an idle one's ends (as in Keycloak).
    rotateRefreshToken: config.refreshIdleTtl ? true : undefined,
    features: {
      devInteractions: { enabled: false },
      // OpenID Connect Back-Channel Logout 1.0, for clients that register a
      // backchannel_logout_uri: ending the session here posts a logout token to them.
      backchannelLogout: { enabled: true },
      introspection: { enabled: true },
      // Open dynamic client registration (POST /reg), only when the config
      // asks for it; tests use it for one-off redirect URIs.
      registration: { enabled: config.dynamicRegistration, initialAccessToken: false },
      revocation: { enabled: true },
      rpInitiatedLogout: {
        enabled: true,
        logoutSource: async (ctx, form) => {
          // Sign out straight away (development provider); the button is the
          // fallback when scripts are off.
          ctx.body = page('Sign out', `<main>
<h1>Sign out</h1>
${form}
<button type="submit" form="op.logoutForm" name="logout" value="yes">Sign out</button>
<script>
(function () {
  var form = document.getElementById('op.logoutForm');
  var input = document.createElement('input');
  input.type = 'hidden'; input.name = 'logout'; input.value = 'yes';
  form.appendChild(input);
  form.submit();
})();
</script>
</main>`);
        },
        postLogoutSuccessSource: async (ctx) => {
          ctx.body = page('Signed out', '<main><h1>Signed out</h1><p>You are signed out.</p></main>');
        },
      },
    },
    ttl: {
      IdToken: (ctx, token, client) => idTokenTtls.get(client.clientId) ?? config.idTokenTtl,
      AccessToken: config.accessTokenTtl,
      RefreshToken: config.refreshIdleTtl ?? config.sessionTtl,
      Session: config.sessionTtl,
      Grant: config.sessionTtl,
      Interaction: 3600,
      AuthorizationCode: 60,
    },
    findAccount: async (ctx, sub) => {
      const user = usersBySub.get(sub);
      // A disabled user is unknown: refresh tokens and access tokens stop working.
      if (!user || user.disabled) {
        ctx.state.accountRefused = user ? 'User disabled' : 'User not found';
        return undefined;
      }
      return {
        accountId: sub,
        claims: async () => {
          const claims = {
            sub,
            email: user.email,
            email_verified: user.email_verified ?? Boolean(user.email),
            name: user.name ?? user.username,
            preferred_username: user.username,
          };
          if (user.groups !== null) {
            claims.groups = Array.isArray(user.groups) ? [...user.groups] : user.groups;
          }
          return claims;
        },
      };
    },
    // Every configured client is first-party: consent is granted on the
    // user's behalf for all supported scopes and claims.
    loadExistingGrant: async (ctx) => {
      const { client, session, account } = ctx.oidc;
      const grantId = ctx.oidc.result?.consent?.grantId
        || session.grantIdFor(client.clientId);
      if (grantId) {
        const existing = await ctx.oidc.provider.Grant.find(grantId);
        if (existing && existing.accountId === account.accountId) return existing;
      }
      const grant = new ctx.oidc.provider.Grant({
        clientId: client.clientId,
        accountId: account.accountId,
      });
      grant.addOIDCScope(ALL_SCOPES.join(' '));
      grant.addOIDCClaims(ALL_CLAIMS);
      await grant.save();
      return grant;
    },
    renderError: async (ctx, out) => {
      ctx.type = 'html';
      const rows = Object.entries(out)
        .map(([key, value]) => `<dt>${escapeHtml(key)}</dt><dd>${escapeHtml(value)}</dd>`)
        .join('\n');
      ctx.body = page('Error', `<main><h1>Error</h1><dl>\n${rows}\n</dl></main>`);
    },
  });

  // RFC 8252 section 7.3 style: for clients flagged loopback_any_port, an
  // http loopback redirect URI matches a registered one whatever its port.
  // Lets a live test server on a random port use a fixed client.
  const loopbackMatch = (client, value, registered) => {
    if (!anyPortClients.has(client.clientId)) return false;
    let parsed;
    try {
      parsed = new URL(value);
    } catch {
      return false;
    }
    if (parsed.protocol !== 'http:' || !LOOPBACKS.has(parsed.hostname)) return false;
    parsed.port = '';
    return registered.some((uri) => {
      try {
        const candidate = new URL(uri);
        candidate.port = '';
        return candidate.href === parsed.href;
      } catch {
        return false;
      }
    });
  };
  const { prototype } = provider.Client;
  const redirectUriAllowed = prototype.redirectUriAllowed;
  prototype.redirectUriAllowed = function allowRedirect(value) {
    return redirectUriAllowed.call(this, value) || loopbackMatch(this, value, this.redirectUris);
  };
  const postLogoutAllowed = prototype.postLogoutRedirectUriAllowed;
  prototype.postLogoutRedirectUriAllowed = function allowPostLogout(value) {
    return postLogoutAllowed.call(this, value)
      || loopbackMatch(this, value, this.postLogoutRedirectUris || []);
  };

  // Token responses and refusals worded as Keycloak words them: a refresh token's lifetime as
  // refresh_expires_in, and why a refresh is refused ("User disabled", "Token is not active").
  provider.use(async (ctx, next) => {
    await next();
    if (ctx.oidc?.route !== 'token' || !ctx.body || typeof ctx.body !== 'object') return;
    if (ctx.status === 200 && ctx.body.refresh_token) {
      ctx.body.refresh_expires_in = config.refreshIdleTtl ?? config.sessionTtl;
    } else if (ctx.body.error === 'invalid_grant' && ctx.oidc.params?.grant_type === 'refresh_token') {
      const presented = String(ctx.oidc.params.refresh_token ?? '');
      ctx.body.error_description = ctx.state.accountRefused
        ?? (endedRefreshTokens.has(presented) ? 'Session not active' : 'Token is not active');
    }
  });

  provider.on('server_error', (ctx, err) => {
    process.stderr.write(`oidc-provider: server error: ${err.stack || err}\n`);
  });
  provider.on('backchannel.error', (ctx, err, client) => {
    process.stderr.write(`oidc-provider: back-channel logout to ${client.clientId} failed: ${err.message}\n`);
  });
  return provider;
}

async function handleInteraction(provider, config, req, res) {
  const url = new URL(req.url, 'http://interaction.invalid');
  const match = /^\/interaction\/([^/]+)(?:\/(login|abort))?\/?$/.exec(url.pathname);
  if (!match) {
    send(res, 404, page('Not found', '<main><h1>Not found</h1></main>'));
    return;
  }
  const action = match[2];
  let details;
  try {
    details = await provider.interactionDetails(req, res);
  } catch (err) {
    send(res, 400, page('Error', `<main><h1>Sign-in session expired</h1>
<p role="alert">${escapeHtml(err.error_description || err.message)}</p></main>`));
    return;
  }
  if (details.uid !== match[1]) {
    send(res, 400, page('Error', '<main><h1>Interaction mismatch</h1></main>'));
    return;
  }
  const client = await provider.Client.find(details.params.client_id);
  const clientName = client?.clientName || details.params.client_id;

  if (action === 'abort') {
    await provider.interactionFinished(req, res, {
      error: 'access_denied',
      error_description: 'End-User aborted interaction',
    }, { mergeWithLastSubmission: false });
    return;
  }

  if (details.prompt.name === 'consent') {
    // First-party clients: grant whatever is missing without asking.
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: client.clientId });
    const missing = details.prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    if (missing.missingResourceScopes) {
      for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes)) {
        grant.addResourceScope(indicator, scopes.join(' '));
      }
    }
    const grantId = await grant.save();
    await provider.interactionFinished(req, res, { consent: { grantId } }, {
      mergeWithLastSubmission: true,
    });
    return;
  }

  if (details.prompt.name !== 'login') {
    send(res, 400, page('Error', `<main><h1>Unsupported prompt</h1>
<p>${escapeHtml(details.prompt.name)}</p></main>`));
    return;
  }

  if (action !== 'login') {
    send(res, 200, loginPage({
      uid: details.uid, clientName, username: details.params.login_hint ?? '',
    }));
    return;
  }
  if (req.method !== 'POST') {
    send(res, 405, page('Error', '<main><h1>Method not allowed</h1></main>'), { Allow: 'POST' });
    return;
  }
  const form = await readForm(req);
  const username = (form.get('login') ?? '').trim();
  const password = form.get('password') ?? '';
  const user = config.usersByName.get(username);
  if (!user || user.disabled || !passwordMatches(user.password, password)) {
    send(res, 200, loginPage({
      uid: details.uid, clientName, username, error: 'Invalid username or password.',
    }));
    return;
  }
  await provider.interactionFinished(req, res, {
    login: { accountId: user.sub },
  }, { mergeWithLastSubmission: false });
}

// POST /_control/users/<username> with JSON {"groups": ..., "disabled": bool}: change a user
// while the provider runs (tests: a user leaves a group or is disabled at the provider).
// POST /_control/sessions/end-all: every login session ends, as Keycloak's realm action "Sign
// out all active sessions" does (see endAllSessions in adapter.js): no logout token is sent.
// Only with "control_api": true in the config.
async function handleControl(config, req, res) {
  const json = (status, body) => {
    res.writeHead(status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store' });
    res.end(JSON.stringify(body));
  };
  if (req.url === '/_control/sessions/end-all' && req.method === 'POST') {
    json(200, { sessions_ended: endAllSessions() });
    return;
  }
  const match = /^\/_control\/users\/([^/?]+)$/.exec(req.url);
  if (!match || req.method !== 'POST') {
    json(404, { error: 'not_found' });
    return;
  }
  const user = config.usersByName.get(decodeURIComponent(match[1]));
  if (!user) {
    json(404, { error: 'unknown_user' });
    return;
  }
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  let change;
  try {
    change = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
  } catch {
    json(400, { error: 'invalid_json' });
    return;
  }
  if ('groups' in change) {
    if (!validGroups(change.groups)) {
      json(400, { error: 'invalid_groups' });
      return;
    }
    user.groups = change.groups;
  }
  if ('disabled' in change) user.disabled = Boolean(change.disabled);
  json(200, { username: user.username, groups: user.groups, disabled: user.disabled });
}

async function main() {
  const options = parseCommandLine();
  const config = loadConfig(options.configPath);

  let ready = null;
  const server = http.createServer((req, res) => {
    if (!ready) {
      send(res, 503, page('Starting', '<main><h1>Starting</h1></main>'));
      return;
    }
    ready(req, res);
  });
  // Keep-alive sockets must not hold a shutdown open for long.
  server.keepAliveTimeout = 2000;

  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, HOST, resolve);
  }).catch((err) => fail(`cannot listen on ${HOST}:${options.port}: ${err.message}`));

  const { port } = server.address();
  const issuer = `http://${HOST}:${port}`;
  const provider = buildProvider(issuer, config);
  const providerCallback = provider.callback();

  ready = (req, res) => {
    if (config.controlApi && req.url.startsWith('/_control/')) {
      handleControl(config, req, res).catch((err) => {
        process.stderr.write(`oidc-provider: control error: ${err.stack || err}\n`);
        if (!res.headersSent) res.writeHead(500);
        res.end();
      });
      return;
    }
    if (req.url.startsWith('/interaction/')) {
      handleInteraction(provider, config, req, res).catch((err) => {
        process.stderr.write(`oidc-provider: interaction error: ${err.stack || err}\n`);
        if (!res.headersSent) send(res, 500, page('Error', '<main><h1>Server error</h1></main>'));
        else res.end();
      });
      return;
    }
    providerCallback(req, res);
  };

  const announcement = JSON.stringify({ issuer, port });
  if (options.portFile) {
    const tmp = `${options.portFile}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, `${announcement}\n`);
    fs.renameSync(tmp, options.portFile);
  }
  process.stdout.write(`${announcement}\n`);

  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    server.close(() => process.exit(0));
    server.closeAllConnections();
    setTimeout(() => process.exit(0), 3000).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main().catch((err) => fail(err.stack || String(err)));
