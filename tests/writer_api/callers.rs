//! Orders belong to their caller: an order and an idempotency key are its
//! owner's, a request without a principal is 401 unless run locally, and
//! (through the writer binary) an owner is a principal, not a role session.

use lambda_http::http::StatusCode;
use serde_json::{json, Value};
use testkit::{request_from, Principal, Stack};

use super::{body, create_as, order_json, service};

const ALICE: Principal<'static> = Principal::Iam("arn:aws:iam::123456789012:user/alice");
const BOB: Principal<'static> = Principal::Jwt("bob-subject");

#[tokio::test]
async fn orders_belong_to_their_caller() {
    let stack = Stack::new().await;
    let api = service(&stack);
    let created = create_as(&api, ALICE, None).await;
    assert_eq!(created.status(), StatusCode::CREATED);
    let id = body(&created)["orderId"].as_str().unwrap().to_owned();
    // The owner is stored, and neither returned nor published.
    let meta = stack.get(&format!("ORDER#{id}"), "META").await.unwrap();
    let owner = meta["ownerId"].as_s().unwrap();
    assert_eq!(owner, "iam:arn:aws:iam::123456789012:user/alice");
    assert!(body(&created).get("ownerId").is_none());
    assert!(!stack.outbox_items().await[0].envelope.contains("alice"));

    // Bob gets exactly what an unknown order gets, and cannot pay it.
    let call = |who, method, path: &str| api.handle(request_from(who, method, path, &[], None));
    let unknown = format!("/orders/{}", ulid::Ulid::new());
    let missing = call(BOB, "GET", &unknown).await;
    let (path, payment) = (format!("/orders/{id}"), format!("/orders/{id}/payment"));
    let theirs = call(BOB, "GET", &path).await;
    assert_eq!(theirs.status(), StatusCode::NOT_FOUND);
    assert_eq!(body(&theirs), body(&missing));
    let paid = call(BOB, "POST", &payment).await;
    assert_eq!(paid.status(), StatusCode::NOT_FOUND);
    assert_eq!(body(&paid)["error"]["code"], "order_not_found");
    assert_eq!(stack.outbox_items().await.len(), 1, "no OrderPaid");

    // Alice reads and pays it.
    assert_eq!(call(ALICE, "GET", &path).await.status(), StatusCode::OK);
    assert_eq!(call(ALICE, "POST", &payment).await.status(), StatusCode::OK);
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
    let headers = [
        ("content-type", "application/json"),
        ("idempotency-key", "shared-key"),
    ];
    let other_body = json!({"customerId": "c-2", "currency": "EUR", "items": [{"sku": "B", "quantity": 1, "unitPriceCents": 1}]}).to_string();
    let reused = request_from(ALICE, "POST", "/orders", &headers, Some(&other_body));
    let status = api.handle(reused).await.status();
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
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
        let body_json = order_json();
        let request = request_from(
            Principal::Anonymous,
            method,
            path,
            &headers,
            Some(&body_json),
        );
        let response = api.handle(request).await;
        let status = response.status();
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path}");
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
    let [ada_is, bea_is] = ["us-east-1:ada", "us-east-1:bea"].map(Principal::Cognito);
    let (status, ada) = call(ada_is, "POST", "/orders".into()).await;
    assert_eq!(status, 201);
    let ada = ada["orderId"].as_str().unwrap().to_owned();
    assert_eq!(owner(ada.clone()).await, "cognito:us-east-1:ada");
    let (theirs, payment) = (format!("/orders/{ada}"), format!("/orders/{ada}/payment"));
    let (status, _) = call(bea_is, "GET", theirs.clone()).await;
    assert_eq!(status, 404, "another pool user does not see it");
    let (status, _) = call(bea_is, "POST", payment).await;
    assert_eq!(status, 404, "nor pay it");
    let (status, _) = call(ada_is, "GET", theirs.clone()).await;
    assert_eq!(status, 200);
    // The pool's shared session without its identity: nobody.
    let shared = Principal::Iam(testkit::COGNITO_SESSION_ARN);
    let (status, body) = call(shared, "GET", theirs.clone()).await;
    let code = body["error"]["code"].as_str();
    assert_eq!((status, code), (401, Some("unauthenticated")));

    // A service's role: one caller across sessions (a redeployed task).
    let (status, svc) = call(session("task-1"), "POST", "/orders".into()).await;
    assert_eq!(status, 201);
    let svc = svc["orderId"].as_str().unwrap().to_owned();
    let role = "iam:arn:aws:sts::123456789012:assumed-role/OrdersService";
    assert_eq!(owner(svc.clone()).await, role);
    let (status, _) = call(session("task-2"), "POST", format!("/orders/{svc}/payment")).await;
    let pays = "the next task of the same service pays its order";
    assert_eq!(status, 200, "{pays}");
    // A session named after another principal reaches nothing of theirs.
    let (status, _) = call(session("us-east-1:ada"), "GET", theirs).await;
    assert_eq!(status, 404);
    let alice = "arn:aws:iam::123456789012:user/alice";
    let (status, mine) = call(Principal::Iam(alice), "POST", "/orders".into()).await;
    assert_eq!(status, 201);
    let mine = mine["orderId"].as_str().unwrap().to_owned();
    let (status, _) = call(session("alice"), "GET", format!("/orders/{mine}")).await;
    assert_eq!(status, 404);
}
