SELECT c.id AS customer_id, c.name, SUM(i.quantity * i.unit_price_cents) AS revenue_cents
FROM customers c
JOIN orders o ON o.customer_id = c.id
JOIN order_items i ON i.order_id = o.id
WHERE o.status = 'paid' AND o.ordered_at >= '2023-01-01' AND o.ordered_at < '2024-01-01'
GROUP BY c.id
ORDER BY revenue_cents DESC, customer_id
LIMIT 5;
