// Small in-process storage adapter for oidc-provider.
//
// Everything lives in one Map and is lost when the process exits, which is
// what a development/test provider wants. Expiry is honoured on read.

const storage = new Map();

function now() {
  return Math.floor(Date.now() / 1000);
}

function read(key) {
  const entry = storage.get(key);
  if (!entry) return undefined;
  if (entry.expiresAt !== undefined && entry.expiresAt <= now()) {
    storage.delete(key);
    return undefined;
  }
  return entry.value;
}

function write(key, value, expiresIn) {
  storage.set(key, {
    value,
    expiresAt: expiresIn ? now() + expiresIn : undefined,
  });
}

const GRANTABLE = new Set([
  'AccessToken',
  'AuthorizationCode',
  'RefreshToken',
  'DeviceCode',
  'BackchannelAuthenticationRequest',
]);

export default class MemoryAdapter {
  constructor(model) {
    this.model = model;
  }

  key(id) {
    return `${this.model}:${id}`;
  }

  async upsert(id, payload, expiresIn) {
    const key = this.key(id);
    if (this.model === 'Session' && payload.uid) {
      write(`sessionUid:${payload.uid}`, id, expiresIn);
    }
    if (GRANTABLE.has(this.model) && payload.grantId) {
      const grantKey = `grant:${payload.grantId}`;
      const keys = read(grantKey) || [];
      keys.push(key);
      write(grantKey, keys, expiresIn);
    }
    if (payload.userCode) {
      write(`userCode:${payload.userCode}`, id, expiresIn);
    }
    write(key, { ...payload }, expiresIn);
  }

  async find(id) {
    return read(this.key(id));
  }

  async findByUid(uid) {
    const id = read(`sessionUid:${uid}`);
    return id === undefined ? undefined : this.find(id);
  }

  async findByUserCode(userCode) {
    const id = read(`userCode:${userCode}`);
    return id === undefined ? undefined : this.find(id);
  }

  async consume(id) {
    const value = read(this.key(id));
    if (value) value.consumed = now();
  }

  async destroy(id) {
    storage.delete(this.key(id));
  }

  async revokeByGrantId(grantId) {
    const grantKey = `grant:${grantId}`;
    for (const key of read(grantKey) || []) storage.delete(key);
    storage.delete(grantKey);
  }
}

// Refresh tokens (their values) that endAllSessions() took away, so that a refresh with one is
// refused in Keycloak's words for a session that was ended ("Session not active").
export const endedRefreshTokens = new Set();

// Every login session ends at once, as Keycloak's realm action "Sign out all active sessions"
// does: the provider's session cookies stop signing anyone in and the refresh tokens of those
// sessions stop working (oidc-provider then refuses the sessions' access tokens at userinfo, as
// Keycloak's userinfo does). Nothing is sent to the clients: no back-channel logout token.
// Returns how many sessions ended.
export function endAllSessions() {
  let sessions = 0;
  for (const key of [...storage.keys()]) {
    if (key.startsWith('Session:')) {
      sessions += 1;
      storage.delete(key);
    } else if (key.startsWith('sessionUid:')) {
      storage.delete(key);
    } else if (key.startsWith('RefreshToken:')) {
      endedRefreshTokens.add(key.slice('RefreshToken:'.length));
      storage.delete(key);
    }
  }
  return sessions;
}
