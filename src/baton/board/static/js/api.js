// GraphQL over HTTP on /graphql with the signed-in bearer token.

export class AuthError extends Error {}

export class ApiError extends Error {
  constructor(errors) {
    super(errors.map((e) => e.message).join("; "));
    this.errors = errors;
    this.code = errors[0]?.extensions?.code ?? "error";
  }
}

export class Api {
  // `onRefused` runs when the server no longer accepts the token (revoked or expired).
  constructor(token, onRefused = () => {}) {
    this.token = token;
    this.onRefused = onRefused;
  }

  async request(query, variables = {}) {
    let response;
    try {
      response = await fetch("/graphql", {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json",
          authorization: `Bearer ${this.token}`,
        },
        body: JSON.stringify({ query, variables }),
      });
    } catch {
      throw new ApiError([{ message: "The server cannot be reached.", extensions: { code: "offline" } }]);
    }
    if (response.status === 401) {
      this.onRefused();
      throw new AuthError("The server does not accept this token: it is mistyped, revoked or expired.");
    }
    if (response.status === 503) {
      const wait = response.headers.get("retry-after");
      throw new ApiError([
        {
          message: `The server is busy${wait ? `; try again in ${wait} s` : ""}.`,
          extensions: { code: "unavailable" },
        },
      ]);
    }
    const body = await response.json().catch(() => null);
    if (body === null) {
      throw new ApiError([{ message: `The server answered ${response.status}.`, extensions: { code: "http" } }]);
    }
    if (body.errors?.length) throw new ApiError(body.errors);
    return body.data;
  }
}

// Words for a failed call, whatever threw it.
export function problem(error) {
  if (error instanceof AuthError || error instanceof ApiError) return error.message;
  return `Something went wrong: ${error?.message ?? error}`;
}
