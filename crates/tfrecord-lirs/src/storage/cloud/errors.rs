//! Object-store errors (`cloud`) as the `io::Error` kinds the core maps, with what to do
//! about them: a missing object, refused or missing credentials (naming the variables
//! each store's client reads), a storage that did not serve the request.

use std::io;

/// Retries of a failed request (5xx, timeouts, dropped connections), with the
/// client's exponential backoff (100 ms doubling up to 15 s); the advice of an error
/// that outlived them names this number.
pub(super) const MAX_RETRIES: usize = 10;

/// An object-store error as the `io::Error` kind the core maps (NotFound,
/// PermissionDenied, ...), with the store's own words, which name the request that
/// failed (the core's error names the URL), and what to do about it.
pub(super) fn store_error(scheme: &str, e: object_store::Error) -> io::Error {
    let (kind, advice) = match &e {
        object_store::Error::NotFound { .. } => (io::ErrorKind::NotFound, None),
        object_store::Error::InvalidPath { .. } | object_store::Error::NotSupported { .. } => {
            (io::ErrorKind::InvalidInput, None)
        }
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => (
            io::ErrorKind::PermissionDenied,
            Some(format!(
                "the storage refused these credentials: {}",
                credentials_hint(scheme)
            )),
        ),
        // No credentials to sign with: none in the environment, and the metadata
        // service the client then asks (absent off the cloud) gave none. Not the
        // endpoint's fault, whatever the transport error says.
        object_store::Error::Generic { .. } if getting_credentials_failed(&e.to_string()) => (
            io::ErrorKind::PermissionDenied,
            Some(format!(
                "the client could not get credentials: {}",
                missing_credentials_hint(scheme)
            )),
        ),
        // What the client could not get done after its retries with backoff: server
        // errors (5xx), timeouts, refused or dropped connections.
        object_store::Error::Generic { .. } => (
            io::ErrorKind::ConnectionAborted,
            Some(format!(
                "the storage did not serve the request (server errors and dropped \
                 connections are retried up to {MAX_RETRIES} times with backoff); try \
                 again later, or check the endpoint{}",
                endpoint_hint(scheme)
            )),
        ),
        _ => (io::ErrorKind::Other, None),
    };
    match advice {
        Some(advice) => io::Error::new(kind, format!("{e}; {advice}")),
        None => io::Error::new(kind, e.to_string()),
    }
}

/// What in an object-store error's text shows that it came of getting credentials,
/// not of a request to the storage: the builders' refusals of half-given keys, and the
/// requests to the metadata services (and token endpoints) the clients fall back to
/// when the environment has no credentials.
const CREDENTIAL_SIGNS: &[&str] = &[
    "Missing AccessKeyId",
    "Missing SecretAccessKey",
    "GCP credential error",
    "169.254.169.254",
    "169.254.170.2",
    "metadata.google.internal",
    "/latest/api/token",
    "security-credentials",
    "AssumeRoleWithWebIdentity",
    "token request",
];

/// Whether the text of an object-store error shows that getting credentials failed
/// ([`CREDENTIAL_SIGNS`], or a metadata endpoint the environment names).
fn getting_credentials_failed(text: &str) -> bool {
    let configured = [
        "AWS_METADATA_ENDPOINT",
        "GCE_METADATA_HOST",
        "GCE_METADATA_ROOT",
    ]
    .iter()
    .filter_map(|var| std::env::var(var).ok())
    .filter(|endpoint| !endpoint.is_empty());
    CREDENTIAL_SIGNS.iter().any(|sign| text.contains(sign))
        || configured
            .into_iter()
            .any(|endpoint| text.contains(&endpoint))
}

/// What to set when `scheme`'s client found no credentials (the builders' `from_env`
/// and their fallbacks, in their order).
fn missing_credentials_hint(scheme: &str) -> &'static str {
    match scheme {
        "s3" | "s3a" => {
            "none in the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or \
             AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN), and the instance metadata \
             service it then asked gave none (off EC2 there is none): set \
             AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), or run \
             with an instance role that may read this bucket"
        }
        "gs" => {
            "none in the environment (GOOGLE_APPLICATION_CREDENTIALS, \
             GOOGLE_SERVICE_ACCOUNT or GOOGLE_SERVICE_ACCOUNT_KEY, or gcloud's application \
             default credentials), and the metadata server it then asked gave none (off \
             GCE there is none): set GOOGLE_APPLICATION_CREDENTIALS to a service account's \
             key file, or run with a service account that may read this bucket"
        }
        "http" | "https" => "the server needs credentials this client does not send",
        _ => {
            "none in the environment: set AZURE_STORAGE_ACCOUNT_NAME with \
             AZURE_STORAGE_ACCOUNT_KEY (or a SAS token / service principal)"
        }
    }
}

/// Where the credentials of `scheme`'s store come from (the builders' `from_env`).
fn credentials_hint(scheme: &str) -> &'static str {
    match scheme {
        "s3" | "s3a" => {
            "check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), or \
             the instance's role, and that they may read this bucket"
        }
        "gs" => {
            "check GOOGLE_APPLICATION_CREDENTIALS or GOOGLE_SERVICE_ACCOUNT (a key file) or \
             GOOGLE_SERVICE_ACCOUNT_KEY, or the instance's service account, and that it may \
             read this bucket"
        }
        "http" | "https" => "the server needs credentials this client does not send",
        _ => {
            "check AZURE_STORAGE_ACCOUNT_NAME with AZURE_STORAGE_ACCOUNT_KEY (or a SAS \
             token / service principal), and that they may read this container"
        }
    }
}

/// The environment variable naming `scheme`'s endpoint, as advice.
fn endpoint_hint(scheme: &str) -> &'static str {
    match scheme {
        "s3" | "s3a" => " (AWS_ENDPOINT, AWS_REGION)",
        "gs" => " (the service account's gcs_base_url)",
        "http" | "https" => " (the URL's host)",
        _ => " (AZURE_STORAGE_ENDPOINT)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generic(text: &str) -> object_store::Error {
        object_store::Error::Generic {
            store: "S3",
            source: text.to_string().into(),
        }
    }

    #[test]
    fn missing_credentials_name_the_variables_not_the_endpoint() {
        // Without credentials the client asks the instance metadata service (absent
        // here); object_store's words for that, as it reports them.
        let imds = generic(
            "Error performing PUT http://169.254.169.254/latest/api/token in 1.2s, after 3 retries - HTTP error: error sending request",
        );
        let e = store_error("s3", imds);
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        let text = e.to_string();
        assert!(
            text.contains("AWS_ACCESS_KEY_ID") && text.contains("AWS_SECRET_ACCESS_KEY"),
            "{text}"
        );
        assert!(!text.contains("check the endpoint"), "{text}");
        // A key id without its secret: refused by the builder, the same advice.
        let half = store_error("s3", generic("Missing SecretAccessKey"));
        assert_eq!(half.kind(), io::ErrorKind::PermissionDenied);
        // GCS's metadata server: names GOOGLE_APPLICATION_CREDENTIALS.
        let gcs = store_error(
            "gs",
            generic("Error performing token request: Error performing GET http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token"),
        );
        assert_eq!(gcs.kind(), io::ErrorKind::PermissionDenied);
        assert!(
            gcs.to_string().contains("GOOGLE_APPLICATION_CREDENTIALS"),
            "{gcs}"
        );
        // Refused credentials (403) name them too.
        let refused = store_error(
            "gs",
            object_store::Error::PermissionDenied {
                path: "b/o".into(),
                source: "403 Forbidden".to_string().into(),
            },
        );
        assert!(
            refused
                .to_string()
                .contains("GOOGLE_APPLICATION_CREDENTIALS"),
            "{refused}"
        );
        // A server error of the storage itself still blames the storage.
        let busy = store_error(
            "s3",
            generic("Error performing GET http://127.0.0.1:9025/bkt/train.tfrecord - Server returned non-2xx status code: 503 Service Unavailable"),
        );
        assert_eq!(busy.kind(), io::ErrorKind::ConnectionAborted);
        assert!(busy.to_string().contains("check the endpoint"), "{busy}");
    }
}
