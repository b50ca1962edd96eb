SELECT strftime('%Y-%m', o.ordered_at) AS month,
       SUM(i.quantity * i.unit_price_cents) AS revenue_cents,
       COUNT(DISTINCT o.id) AS orders
FROM orders o JOIN order_items i ON i.order_id = o.id
WHERE o.status = 'paid' AND o.ordered_at >= '2023-01-01' AND o.ordered_at < '2024-01-01'
GROUP BY month
ORDER BY month;
