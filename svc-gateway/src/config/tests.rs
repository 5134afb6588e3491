use super::*;

const AUTH: (&str, &str) = ("SVC_AUTH_GRPC_ADDR", "127.0.0.1:9091");

fn parse(extra: &[(&str, &str)]) -> Result<Config, ConfigError> {
    Config::from_map(std::iter::once(AUTH).chain(extra.iter().copied()))
}

fn refused(extra: &[(&str, &str)]) -> ConfigError {
    parse(extra).expect_err("configuration should be refused")
}

#[test]
fn defaults_apply() {
    let c = parse(&[]).unwrap();
    assert_eq!(c.listen.port(), DEFAULT_PORT);
    assert_eq!(c.auth.endpoints, ["http://127.0.0.1:9091"]);
    assert_eq!(c.auth.validate_timeout, Duration::from_millis(50));
    assert_eq!(c.redis_url, None);
    assert_eq!(c.rate_limit_rpm, 600);
    assert_eq!(c.provider.mode, LlmMode::Mock);
    assert_eq!(c.provider.models, vec!["svc-mock-1".to_owned()]);
    assert_eq!(c.provider.timeout, Duration::from_secs(60));
    assert_eq!(c.max_request_body_bytes, 1024 * 1024);
    assert_eq!(c.request_id_header, "x-request-id");
    assert_eq!(c.trace_id_header, "x-trace-id");
    assert_eq!(c.env, Environment::Development);
    assert_eq!(c.log.level, LogLevel::Info);
    assert_eq!(c.log.format, LogFormat::Json);
    assert_eq!(c.otel.sample_ratio, 0.01);
    assert_eq!(c.otel.service_name, "svc-gateway");
    assert_eq!(c.otel.deployment_environment, "development");
    assert!(c.postgres_dsn.is_none() && c.sentry_dsn.is_none() && c.error_docs_base.is_none());
    assert!(c.access_log);
    assert!(!parse(&[("SVC_ACCESS_LOG", "false")]).unwrap().access_log);
}

#[test]
fn auth_addr_is_required_and_named() {
    let err = Config::from_map(Vec::<(String, String)>::new()).unwrap_err();
    assert_eq!(err.variable, "SVC_AUTH_GRPC_ADDR");
    assert!(err.to_string().contains("SVC_AUTH_GRPC_ADDR"));
    assert!(!err.to_string().contains('\n'));
}

#[test]
fn auth_addr_accepts_schemes() {
    for (raw, want) in [
        ("auth:9091", "http://auth:9091"),
        ("http://auth:9091", "http://auth:9091"),
    ] {
        let c = Config::from_map([("SVC_AUTH_GRPC_ADDR", raw)]).unwrap();
        assert_eq!(c.auth.endpoints, [want]);
    }
    let c = Config::from_map([
        ("SVC_AUTH_GRPC_ADDR", "https://auth.internal:443/"),
        ("SVC_AUTH_GRPC_TLS_CA", "/ca.pem"),
    ])
    .unwrap();
    assert_eq!(c.auth.endpoints, ["https://auth.internal:443"]);
    // Several replicas, comma-separated, share one scheme.
    let c = Config::from_map([("SVC_AUTH_GRPC_ADDR", "auth-a:9091,http://auth-b:9091")]).unwrap();
    assert_eq!(
        c.auth.endpoints,
        ["http://auth-a:9091", "http://auth-b:9091"]
    );
    let err = Config::from_map([
        ("SVC_AUTH_GRPC_ADDR", "auth-a:9091,https://auth-b:9091"),
        ("SVC_AUTH_GRPC_TLS_CA", "/ca.pem"),
    ])
    .unwrap_err();
    assert_eq!(err.variable, "SVC_AUTH_GRPC_ADDR");
    for bad in ["auth-a:9091,", "auth-a:9091,auth-b"] {
        let err = Config::from_map([("SVC_AUTH_GRPC_ADDR", bad)]).unwrap_err();
        assert_eq!(err.variable, "SVC_AUTH_GRPC_ADDR", "{bad}");
    }
    for bad in ["auth", "grpc://auth:1", "http://auth", "auth:notaport"] {
        let err = Config::from_map([("SVC_AUTH_GRPC_ADDR", bad)]).unwrap_err();
        assert_eq!(err.variable, "SVC_AUTH_GRPC_ADDR", "{bad}");
    }
}

#[test]
fn each_bad_value_names_its_variable() {
    let cases: &[(&str, &str)] = &[
        ("SVC_PORT", "http"),
        ("SVC_PORT", "0"),
        ("SVC_AUTH_VALIDATE_TIMEOUT", "50"),
        ("REDIS_URL", "localhost:6379"),
        ("SVC_RATE_LIMIT_RPM", "0"),
        ("SVC_LLM_MODE", "fake"),
        ("SVC_PROVIDER_BASE_URL", "api.openai.com"),
        ("SVC_PROVIDER_TIMEOUT", "soon"),
        ("SVC_MAX_REQUEST_BODY_BYTES", "-1"),
        ("SVC_ERROR_DOCS_BASE", "docs"),
        ("SVC_REQUEST_ID_HEADER", "bad header"),
        ("SVC_TRACE_ID_HEADER", "x:y"),
        ("POSTGRES_DSN", "mysql://x"),
        ("SVC_ENV", "qa"),
        ("SVC_LOG_LEVEL", "LOUD"),
        ("SVC_LOG_FORMAT", "xml"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector"),
        ("OTEL_SAMPLE_RATIO", "1.5"),
        ("SENTRY_DSN", "nope"),
        // A URL, but not a DSN: no key, no project.
        ("SENTRY_DSN", "https://sentry.example.com/"),
        ("SVC_GRPC_ALLOW_PLAINTEXT", "perhaps"),
        ("SVC_ACCESS_LOG", "maybe"),
    ];
    for &(var, value) in cases {
        let err = refused(&[(var, value)]);
        assert_eq!(err.variable, var, "{var}={value}");
    }
}

#[test]
fn secrets_are_never_printed() {
    let c = parse(&[
        ("POSTGRES_DSN", "postgres://app:hunter2@db/svc"),
        ("SVC_PROVIDER_BASE_URL", "http://127.0.0.1:1/v1"),
        ("SVC_PROVIDER_API_KEY", "sk-very-secret"),
        ("REDIS_URL", "redis://:redispass@cache:6379"),
    ])
    .unwrap();
    let printed = format!("{c:?}");
    for secret in ["hunter2", "sk-very-secret", "redispass"] {
        assert!(!printed.contains(secret), "{secret} leaked");
    }
    let err = refused(&[("POSTGRES_DSN", "mysql://root:hunter2@db")]);
    assert!(!err.to_string().contains("hunter2"));
}

#[test]
fn llm_mode_follows_the_base_url() {
    let live = parse(&[("SVC_PROVIDER_BASE_URL", "https://api.openai.com/v1/")]).unwrap();
    assert_eq!(live.provider.mode, LlmMode::Live);
    assert_eq!(
        live.provider.base_url.as_deref(),
        Some("https://api.openai.com/v1")
    );
    assert!(live.provider.models.is_empty());

    let mock = parse(&[
        ("SVC_LLM_MODE", "mock"),
        ("SVC_PROVIDER_BASE_URL", "https://api.openai.com/v1"),
        ("SVC_PROVIDER_MODELS", " a , b,, c "),
    ])
    .unwrap();
    assert_eq!(mock.provider.mode, LlmMode::Mock);
    assert_eq!(mock.provider.models, ["a", "b", "c"]);

    assert_eq!(
        refused(&[("SVC_LLM_MODE", "live")]).variable,
        "SVC_PROVIDER_BASE_URL"
    );
}

#[test]
fn production_refuses_unsafe_defaults() {
    let prod = ("SVC_ENV", "production");
    let plaintext_ok = ("SVC_GRPC_ALLOW_PLAINTEXT", "true");
    assert_eq!(refused(&[prod, plaintext_ok]).variable, "SVC_LLM_MODE");
    assert_eq!(
        refused(&[prod, ("SVC_LLM_MODE", "mock")]).variable,
        "SVC_AUTH_GRPC_ADDR"
    );
    assert_eq!(
        refused(&[
            prod,
            plaintext_ok,
            ("SVC_LLM_MODE", "mock"),
            ("SVC_LOG_FORMAT", "text")
        ])
        .variable,
        "SVC_LOG_FORMAT"
    );
    let c = parse(&[prod, plaintext_ok, ("SVC_LLM_MODE", "mock")]).unwrap();
    assert_eq!(c.env, Environment::Production);
    assert_eq!(c.otel.deployment_environment, "production");
    let tls = Config::from_map([
        ("SVC_AUTH_GRPC_ADDR", "https://auth:9091"),
        ("SVC_AUTH_GRPC_TLS_CA", "/etc/tls/ca.pem"),
        ("SVC_ENV", "production"),
        ("SVC_PROVIDER_BASE_URL", "https://api.openai.com/v1"),
    ])
    .unwrap();
    assert_eq!(tls.provider.mode, LlmMode::Live);
}

#[test]
fn production_refuses_a_plaintext_provider_unless_allowed() {
    let base = [
        ("SVC_AUTH_GRPC_ADDR", "127.0.0.1:9091"),
        ("SVC_GRPC_ALLOW_PLAINTEXT", "true"),
        ("SVC_ENV", "production"),
    ];
    let with = |extra: &[(&'static str, &'static str)]| {
        Config::from_map(base.iter().chain(extra).copied())
    };
    let error = with(&[("SVC_PROVIDER_BASE_URL", "http://llm.internal/v1")]).unwrap_err();
    assert_eq!(error.variable, "SVC_PROVIDER_BASE_URL");
    assert!(error.problem.contains("SVC_PROVIDER_ALLOW_HTTP"), "{error}");
    assert!(
        with(&[
            ("SVC_PROVIDER_BASE_URL", "http://llm.internal/v1"),
            ("SVC_PROVIDER_ALLOW_HTTP", "true")
        ])
        .is_ok()
    );
    assert!(with(&[("SVC_PROVIDER_BASE_URL", "https://api.openai.com/v1")]).is_ok());
    // Outside production a loopback provider over plain HTTP is the common case.
    assert!(
        Config::from_map([
            ("SVC_AUTH_GRPC_ADDR", "127.0.0.1:9091"),
            ("SVC_PROVIDER_BASE_URL", "http://127.0.0.1:8000/v1"),
        ])
        .is_ok()
    );
    assert_eq!(
        with(&[
            ("SVC_PROVIDER_BASE_URL", "https://x/v1"),
            ("SVC_PROVIDER_ALLOW_HTTP", "maybe")
        ])
        .unwrap_err()
        .variable,
        "SVC_PROVIDER_ALLOW_HTTP"
    );
}

#[test]
fn values_are_parsed() {
    let c = parse(&[
        ("SVC_PORT", "9000"),
        ("SVC_AUTH_VALIDATE_TIMEOUT", "2s"),
        ("REDIS_URL", "redis://127.0.0.1:6379"),
        ("SVC_RATE_LIMIT_RPM", "60"),
        ("SVC_PROVIDER_TIMEOUT", "1500ms"),
        ("SVC_MAX_REQUEST_BODY_BYTES", "2048"),
        ("SVC_ERROR_DOCS_BASE", "https://docs.example.com/errors/"),
        ("SVC_REQUEST_ID_HEADER", "X-Correlation-ID"),
        ("SVC_TRACE_ID_HEADER", "X-B3-TraceId"),
        ("SVC_LOG_LEVEL", "debug"),
        ("SVC_LOG_FORMAT", "text"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4317"),
        ("OTEL_SAMPLE_RATIO", "0.5"),
        ("SVC_SERVICE_NAME", "edge"),
        ("SVC_ENV", "staging"),
    ])
    .unwrap();
    assert_eq!(c.listen.port(), 9000);
    assert_eq!(c.auth.validate_timeout, Duration::from_secs(2));
    assert_eq!(
        c.redis_url.as_ref().map(Secret::expose),
        Some("redis://127.0.0.1:6379")
    );
    assert_eq!(c.rate_limit_rpm, 60);
    assert_eq!(c.provider.timeout, Duration::from_millis(1500));
    assert_eq!(c.max_request_body_bytes, 2048);
    assert_eq!(
        c.error_docs_base.as_deref(),
        Some("https://docs.example.com/errors")
    );
    assert_eq!(c.request_id_header, "x-correlation-id");
    assert_eq!(c.trace_id_header, "x-b3-traceid");
    assert_eq!(c.log.level, LogLevel::Debug);
    assert_eq!(c.log.format, LogFormat::Text);
    assert_eq!(c.otel.endpoint.as_deref(), Some("http://collector:4317"));
    assert_eq!(c.otel.sample_ratio, 0.5);
    assert_eq!(c.otel.service_name, "edge");
    assert_eq!(c.otel.deployment_environment, "staging");
}

#[test]
fn empty_values_count_as_unset() {
    let c = parse(&[("REDIS_URL", ""), ("SVC_PORT", " "), ("SVC_LLM_MODE", "")]).unwrap();
    assert_eq!(c.redis_url, None);
    assert_eq!(c.listen.port(), DEFAULT_PORT);
    assert_eq!(c.provider.mode, LlmMode::Mock);
}

#[test]
fn https_needs_a_ca() {
    let err = Config::from_map([("SVC_AUTH_GRPC_ADDR", "https://auth:9091")]).unwrap_err();
    assert_eq!(err.variable, "SVC_AUTH_GRPC_TLS_CA");
}

#[test]
fn tls_files_need_an_https_address() {
    let ca = ("SVC_AUTH_GRPC_TLS_CA", "/etc/tls/ca.pem");
    let cert = ("SVC_AUTH_GRPC_TLS_CERT", "/etc/tls/client.pem");
    let key = ("SVC_AUTH_GRPC_TLS_KEY", "/etc/tls/client.key");
    for addr in ["auth:9091", "http://auth:9091"] {
        let addr = ("SVC_AUTH_GRPC_ADDR", addr);
        for (vars, want) in [
            (vec![addr, ca], "SVC_AUTH_GRPC_TLS_CA"),
            (vec![addr, ca, cert, key], "SVC_AUTH_GRPC_TLS_CA"),
            (vec![addr, cert, key], "SVC_AUTH_GRPC_TLS_CERT"),
        ] {
            let err = Config::from_map(vars).unwrap_err();
            assert_eq!(err.variable, want, "{addr:?}");
            assert!(err.to_string().contains("https://"), "{err}");
        }
    }
}

#[test]
fn tls_cert_and_key_go_together() {
    assert_eq!(
        refused(&[("SVC_AUTH_GRPC_TLS_CERT", "/etc/tls/client.pem")]).variable,
        "SVC_AUTH_GRPC_TLS_KEY"
    );
}

#[test]
fn auth_failure_limit_variables() {
    let c = parse(&[]).unwrap();
    assert_eq!(c.auth_failures_per_minute, DEFAULT_AUTH_FAILURES_PER_MINUTE);
    assert_eq!(c.auth_refusal_delay, DEFAULT_AUTH_REFUSAL_DELAY);
    assert_eq!(c.trusted_proxy_header, None);
    let c = parse(&[
        (SVC_AUTH_FAILURES_PER_MINUTE, "0"),
        (SVC_AUTH_REFUSAL_DELAY, "0s"),
        (SVC_TRUSTED_PROXY_HEADER, "X-Forwarded-For"),
    ])
    .unwrap();
    assert_eq!(c.auth_failures_per_minute, 0);
    assert_eq!(c.auth_refusal_delay, Duration::ZERO);
    for bad in ["100", "11s", "soon"] {
        assert_eq!(
            refused(&[(SVC_AUTH_REFUSAL_DELAY, bad)]).variable,
            SVC_AUTH_REFUSAL_DELAY
        );
    }
    assert_eq!(c.trusted_proxy_header.unwrap(), "x-forwarded-for");
    assert_eq!(
        refused(&[(SVC_AUTH_FAILURES_PER_MINUTE, "-1")]).variable,
        SVC_AUTH_FAILURES_PER_MINUTE
    );
    assert_eq!(
        refused(&[(SVC_TRUSTED_PROXY_HEADER, "bad header")]).variable,
        SVC_TRUSTED_PROXY_HEADER
    );
}

#[test]
fn production_refuses_a_plaintext_mcp_server_unless_allowed() {
    let dir = svc_testkit::TempDir::create();
    let path = dir.path().join("providers.toml");
    std::fs::write(
        &path,
        "[[providers]]\nname = \"m\"\nkind = \"mock\"\n[[models]]\nname = \"x\"\n\
         targets = [\"m\"]\n[[mcp_servers]]\nname = \"srv\"\nurl = \"http://mcp.internal/mcp\"\n",
    )
    .unwrap();
    let path = path.to_string_lossy().into_owned();
    let with = |extra: &[(&'static str, &'static str)]| {
        let base = [
            ("SVC_AUTH_GRPC_ADDR", "127.0.0.1:9091"),
            ("SVC_GRPC_ALLOW_PLAINTEXT", "true"),
            ("SVC_ENV", "production"),
            ("SVC_PROVIDERS_FILE", path.as_str()),
        ];
        Config::from_map(base.iter().chain(extra).copied())
    };
    let error = with(&[]).unwrap_err();
    assert_eq!(error.variable, "SVC_PROVIDERS_FILE");
    assert!(error.problem.contains("mcp server \"srv\""), "{error}");
    assert!(with(&[("SVC_PROVIDER_ALLOW_HTTP", "true")]).is_ok());
}
