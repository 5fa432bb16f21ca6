//! Orders belong to their caller: an order and an idempotency key are its
//! owner's, a request without a principal is 401 unless run locally, and
//! (through the writer binary) an owner is a principal, not a role session.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Response};
use serde_json::{json, Value};
use testkit::contract::CheckedApi;
use testkit::{request_from, Principal, Stack};

use super::{body, order_json, service};

const ALICE: Principal<'static> = Principal::Iam("arn:aws:iam::123456789012:user/alice");
const BOB: Principal<'static> = Principal::Jwt("bob-subject");

async fn create_as(api: &CheckedApi, who: Principal<'_>, key: Option<&str>) -> Response<Body> {
    let mut headers = vec![("content-type", "application/json")];
    if let Some(key) = key {
        headers.push(("idempotency-key", key));
    }
    api.handle(request_from(
        who,
        "POST",
        "/orders",
        &headers,
        Some(&order_json()),
    ))
    .await
}

#[tokio::test]
async fn orders_belong_to_their_caller() {
    let stack = Stack::new().await;
    let api = service(&stack);
    let created = create_as(&api, ALICE, None).await;
    assert_eq!(created.status(), StatusCode::CREATED);
    let id = body(&created)["orderId"].as_str().unwrap().to_owned();
    // The owner is stored, and neither returned nor published.
    let meta = stack.get(&format!("ORDER#{id}"), "META").await.unwrap();
    assert_eq!(
        meta["ownerId"].as_s().unwrap(),
        "iam:arn:aws:iam::123456789012:user/alice"
    );
    assert!(body(&created).get("ownerId").is_none());
    assert!(!stack.outbox_items().await[0].envelope.contains("alice"));

    // Bob gets exactly what an unknown order gets, and cannot pay it.
    let unknown = format!("/orders/{}", ulid::Ulid::new());
    let missing = api
        .handle(request_from(BOB, "GET", &unknown, &[], None))
        .await;
    let path = format!("/orders/{id}");
    let theirs = api.handle(request_from(BOB, "GET", &path, &[], None)).await;
    assert_eq!(theirs.status(), StatusCode::NOT_FOUND);
    assert_eq!(body(&theirs), body(&missing));
    let paid = api
        .handle(request_from(
            BOB,
            "POST",
            &format!("{path}/payment"),
            &[],
            None,
        ))
        .await;
    assert_eq!(paid.status(), StatusCode::NOT_FOUND);
    assert_eq!(body(&paid)["error"]["code"], "order_not_found");
    assert_eq!(stack.outbox_items().await.len(), 1, "no OrderPaid");

    // Alice reads and pays it.
    let mine = api
        .handle(request_from(ALICE, "GET", &path, &[], None))
        .await;
    assert_eq!(mine.status(), StatusCode::OK);
    let paid = api
        .handle(request_from(
            ALICE,
            "POST",
            &format!("{path}/payment"),
            &[],
            None,
        ))
        .await;
    assert_eq!(paid.status(), StatusCode::OK);
}

#[tokio::test]
async fn idempotency_keys_are_scoped_to_the_caller() {
    let stack = Stack::new().await;
    let api = service(&stack);
    let alice = create_as(&api, ALICE, Some("shared-key")).await;
    assert_eq!(alice.status(), StatusCode::CREATED);
    // The same key from Bob is Bob's own: a new order, not Alice's replay,
    // and never a 422 for "another request".
    let bob = create_as(&api, BOB, Some("shared-key")).await;
    assert_eq!(bob.status(), StatusCode::CREATED);
    assert!(bob.headers().get("idempotent-replayed").is_none());
    assert_ne!(body(&alice)["orderId"], body(&bob)["orderId"]);
    // Each caller's retry replays their own response.
    let again = create_as(&api, BOB, Some("shared-key")).await;
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(body(&again)["orderId"], body(&bob)["orderId"]);
    let mut headers = vec![
        ("content-type", "application/json"),
        ("idempotency-key", "shared-key"),
    ];
    let other_body = json!({"customerId": "c-2", "currency": "EUR", "items": [{"sku": "B", "quantity": 1, "unitPriceCents": 1}]}).to_string();
    let reused = api
        .handle(request_from(
            ALICE,
            "POST",
            "/orders",
            &headers,
            Some(&other_body),
        ))
        .await;
    assert_eq!(reused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    headers.pop();
    assert_eq!(stack.outbox_items().await.len(), 2);
}

#[tokio::test]
async fn requests_without_a_principal_are_401_unless_run_locally() {
    let stack = Stack::new().await;
    let api = service(&stack);
    for (method, path) in [
        ("POST", "/orders"),
        ("GET", "/orders/01J00000000000000000000000"),
        ("POST", "/orders/01J00000000000000000000000/payment"),
    ] {
        let headers = [("content-type", "application/json")];
        let response = api
            .handle(request_from(
                Principal::Anonymous,
                method,
                path,
                &headers,
                Some(&order_json()),
            ))
            .await;
        assert_eq!(
            response.status(),
            StatusCode::UNAUTHORIZED,
            "{method} {path}"
        );
        let error = body(&response);
        assert_eq!(error["error"]["code"], "unauthenticated");
        assert!(error["error"]["message"].is_string());
    }
    assert!(stack.items().await.is_empty(), "nothing was written");
    assert!(stack.calls.calls().is_empty(), "no AWS call was made");

    // With the local setting, the same request acts as the local caller.
    let local = service(&stack).with_local_caller(writer::Caller::local("demo").unwrap());
    let response = create_as(&local, Principal::Anonymous, None).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let id = body(&response)["orderId"].as_str().unwrap().to_owned();
    let meta = stack.get(&format!("ORDER#{id}"), "META").await.unwrap();
    assert_eq!(meta["ownerId"].as_s().unwrap(), "local:demo");
}

/// Issue #25 item 12, through the real writer binary under the local Lambda
/// runtime: an owner is a principal, never a role session. Cognito users of
/// one identity pool (one shared role session) are each their own caller;
/// an assumed role is the same caller whatever its session name (a
/// redeployed task keeps its orders), and a session name cannot be chosen
/// to reach another caller's orders; the shared Cognito session without an
/// identity is 401.
#[tokio::test]
async fn owners_are_principals_not_sessions_through_the_writer_binary() {
    use testkit::api_event;

    let stack = Stack::new().await;
    let writer = stack.function(devkit::Function::Writer, &[], &[]);
    let call = |who: Principal<'static>, method: &'static str, path: String| {
        let writer = &writer;
        async move {
            let body = (method == "POST" && path == "/orders").then(order_json);
            let headers: &[(&str, &str)] = if body.is_some() {
                &[("content-type", "application/json")]
            } else {
                &[]
            };
            let event = api_event(who, method, &path, headers, body.as_deref());
            let answer = writer
                .invoke(event.to_string().as_bytes())
                .await
                .expect("the writer answers");
            let response: Value = serde_json::from_slice(&answer).expect("an API response");
            let status = response["statusCode"].as_u64().expect("a status");
            let body: Value = response["body"]
                .as_str()
                .and_then(|b| serde_json::from_str(b).ok())
                .unwrap_or(Value::Null);
            (status, body)
        }
    };
    let session = |name: &str| {
        Principal::Iam(Box::leak(
            format!("arn:aws:sts::123456789012:assumed-role/OrdersService/{name}").into_boxed_str(),
        ))
    };
    let owner = |id: String| {
        let stack = &stack;
        async move {
            let meta = stack.get(&format!("ORDER#{id}"), "META").await.unwrap();
            meta["ownerId"].as_s().unwrap().clone()
        }
    };

    // Two users of one identity pool: two callers.
    let (status, ada) = call(
        Principal::Cognito("us-east-1:ada"),
        "POST",
        "/orders".into(),
    )
    .await;
    assert_eq!(status, 201);
    let ada = ada["orderId"].as_str().unwrap().to_owned();
    assert_eq!(owner(ada.clone()).await, "cognito:us-east-1:ada");
    let (status, _) = call(
        Principal::Cognito("us-east-1:bea"),
        "GET",
        format!("/orders/{ada}"),
    )
    .await;
    assert_eq!(status, 404, "another pool user does not see it");
    let (status, _) = call(
        Principal::Cognito("us-east-1:bea"),
        "POST",
        format!("/orders/{ada}/payment"),
    )
    .await;
    assert_eq!(status, 404, "nor pay it");
    let (status, _) = call(
        Principal::Cognito("us-east-1:ada"),
        "GET",
        format!("/orders/{ada}"),
    )
    .await;
    assert_eq!(status, 200);
    // The pool's shared session without its identity: nobody.
    let (status, body) = call(
        Principal::Iam(testkit::COGNITO_SESSION_ARN),
        "GET",
        format!("/orders/{ada}"),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("unauthenticated"))
    );

    // A service's role: one caller across sessions (a redeployed task).
    let (status, svc) = call(session("task-1"), "POST", "/orders".into()).await;
    assert_eq!(status, 201);
    let svc = svc["orderId"].as_str().unwrap().to_owned();
    assert_eq!(
        owner(svc.clone()).await,
        "iam:arn:aws:sts::123456789012:assumed-role/OrdersService"
    );
    let (status, _) = call(session("task-2"), "POST", format!("/orders/{svc}/payment")).await;
    assert_eq!(
        status, 200,
        "the next task of the same service pays its order"
    );
    // A session named after another principal reaches nothing of theirs.
    let (status, _) = call(session("us-east-1:ada"), "GET", format!("/orders/{ada}")).await;
    assert_eq!(status, 404);
    let alice = "arn:aws:iam::123456789012:user/alice";
    let (status, mine) = call(Principal::Iam(alice), "POST", "/orders".into()).await;
    assert_eq!(status, 201);
    let mine = mine["orderId"].as_str().unwrap().to_owned();
    let (status, _) = call(session("alice"), "GET", format!("/orders/{mine}")).await;
    assert_eq!(status, 404);
}
