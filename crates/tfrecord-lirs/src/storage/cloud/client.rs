//! The clients of object storage (`cloud`): one per bucket (or HTTP origin), built
//! from the URL and the environment, and the HTTP connector under them, which counts
//! the responses that refuse a request for load (429, 503: S3's `SlowDown`), before the
//! client's retries hide them, for the adaptive limit of requests in flight.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpRequest, HttpResponse, HttpService, ReqwestConnector,
};
use object_store::{ClientOptions, ObjectStore};

/// A client for the bucket (or HTTP origin) `base`, configured from the environment,
/// retrying as `retry` says, counting throttled responses in `throttled`.
pub(crate) fn build_store(
    scheme: &str,
    base: &str,
    retry: &object_store::RetryConfig,
    throttled: &Arc<AtomicU64>,
) -> object_store::Result<Arc<dyn ObjectStore>> {
    let retry_config = || retry.clone();
    let connector = || Counting {
        throttled: Arc::clone(throttled),
    };
    Ok(match scheme {
        "s3" | "s3a" => Arc::new(
            object_store::aws::AmazonS3Builder::from_env()
                .with_url(base)
                .with_retry(retry_config())
                .with_http_connector(connector())
                .build()?,
        ),
        // A GCS emulator is reached through the service account's `gcs_base_url` (with
        // `disable_oauth`), as object_store documents for its own tests.
        "gs" => Arc::new(
            object_store::gcp::GoogleCloudStorageBuilder::from_env()
                .with_url(base)
                .with_retry(retry_config())
                .with_http_connector(connector())
                .build()?,
        ),
        // An http:// URL is the user's choice of plain HTTP (the client refuses it
        // unless told).
        "http" | "https" => Arc::new(
            object_store::http::HttpBuilder::new()
                .with_url(base)
                .with_client_options(ClientOptions::new().with_allow_http(scheme == "http"))
                .with_retry(retry_config())
                .with_http_connector(connector())
                .build()?,
        ),
        _ => Arc::new(
            object_store::azure::MicrosoftAzureBuilder::from_env()
                .with_url(base)
                .with_retry(retry_config())
                .with_http_connector(connector())
                .build()?,
        ),
    })
}

/// object_store's own reqwest connector, its responses counted.
#[derive(Debug)]
struct Counting {
    throttled: Arc<AtomicU64>,
}

impl HttpConnector for Counting {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        Ok(HttpClient::new(CountingService {
            inner: ReqwestConnector::default().connect(options)?,
            throttled: Arc::clone(&self.throttled),
        }))
    }
}

#[derive(Debug)]
struct CountingService {
    inner: HttpClient,
    throttled: Arc<AtomicU64>,
}

impl HttpService for CountingService {
    // The trait's method as its `async_trait` declaration expands it.
    fn call<'a, 'b>(
        &'a self,
        request: HttpRequest,
    ) -> Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + Send + 'b>>
    where
        'a: 'b,
        Self: 'b,
    {
        Box::pin(async move {
            let response = self.inner.execute(request).await?;
            if matches!(response.status().as_u16(), 429 | 503) {
                self.throttled.fetch_add(1, Ordering::Relaxed);
            }
            Ok(response)
        })
    }
}
